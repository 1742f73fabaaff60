/* Placeholder: merge plans (being written). */
typedef int gs__plan_placeholder;
