/* Placeholder: the merge planner's public API (being written). */
#ifndef GRADSYNC_PLAN_H
#define GRADSYNC_PLAN_H
#endif
