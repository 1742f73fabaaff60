/* The parameter-server and all-reduce-relative sync modes (sync_ps.c,
 * sync_local.c) and the straggler hook (hook_straggler.c); docs/SYNC.md. */
#ifndef GRADSYNC_TRAIN_SYNC_PS_H
#define GRADSYNC_TRAIN_SYNC_PS_H

#include "hooks.h"
#include "sync.h"

/* --sync bsp|asp|ssp:S|switch:... with --ps S (sync_ps.c). */
extern const train_sync_ops train_sync_ps_bsp, train_sync_ps_asp, train_sync_ps_ssp,
    train_sync_ps_switch;
/* --sync local:H | post-local:H[:F] | delayed:D (sync_local.c). */
extern const train_sync_ops train_sync_local, train_sync_post_local, train_sync_delayed;
/* --straggler RANK:FACTOR[:FROM-TO] | RANK:+DELAY[:FROM-TO] (hook_straggler.c). */
extern const train_hook_ops train_hook_straggler;

/* Checks a local-SGD --sync value (GS_ERR_PARSE with a message). */
gs_status train_local_parse(const char *text, int *kind, long *h, double *frac);
gs_status train_straggler_parse(const char *text, int *rank, double *factor, double *delay_s,
                                long *from, long *to);

#endif /* GRADSYNC_TRAIN_SYNC_PS_H */
