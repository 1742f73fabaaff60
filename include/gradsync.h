/*
 * gradsync: communication-efficient data-parallel training.
 *
 * The one header of the public C API. See docs/ARCHITECTURE.md for the layers.
 */
#ifndef GRADSYNC_H
#define GRADSYNC_H

#define GRADSYNC_VERSION_MAJOR 0
#define GRADSYNC_VERSION_MINOR 1
#define GRADSYNC_VERSION_PATCH 0
#define GRADSYNC_VERSION "0.1.0"

#include "gradsync/core.h"
#include "gradsync/comm.h"
#include "gradsync/cost.h"
#include "gradsync/plan.h"
#include "gradsync/sim.h"
#include "gradsync/search.h"
#include "gradsync/engine.h"
#include "gradsync/compress.h"
#include "gradsync/compress_comm.h"
#include "gradsync/ps.h"
#include "gradsync/embed.h"
#include "gradsync/dlrm.h"
#include "gradsync/dlrm_dist.h"

#endif /* GRADSYNC_H */
