/* Placeholder: model profiles (being written). */
typedef int gs__profile_placeholder;
