/*
 * Compression specs ("none", SPEC, "auto:SPEC") and the momentum rule of the
 * kinds that apply momentum themselves: the one home of both, which the
 * engine, the trainer, the command line and the Python binding call.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "compress_internal.h"

static const char auto_prefix[] = "auto:";
#define AUTO_LEN (sizeof auto_prefix - 1)

gs_status gs_compress_spec_parse(const char *spec, gs_compress_spec *out) {
  if (out == NULL) return gs_error(GS_ERR_INVALID_ARG, "gs_compress_spec_parse: out is NULL");
  *out = (gs_compress_spec){.off = 1, .compressor = "", .kind = "none",
                            .normalised = "none", .ef_decay = 1.0f};
  if (spec == NULL || *spec == '\0') return GS_OK;
  const int automatic = strncmp(spec, auto_prefix, AUTO_LEN) == 0;
  const char *cspec = automatic ? spec + AUTO_LEN : spec;
  if (*cspec == '\0')
    return gs_error(GS_ERR_INVALID_ARG, "compression '%s': expected auto:SPEC with a "
                    "compressor spec (%s)", spec, gs_compressor_kinds());
  gs_compressor *c = NULL;
  gs_status st = gs_compressor_create(cspec, &c);
  if (st != GS_OK) {
    char why[900];
    gs__error_copy(why, sizeof why); /* gs_error writes the buffer it reads */
    return gs_error(st, "compression '%s': %s", spec, why);
  }
  /* "none" as a compressor is no compression at all: every group dense. */
  if (c->kind == &gs__kind_none) {
    gs_compressor_destroy(c);
    return GS_OK;
  }
  gs_compressor_info info;
  gs_compressor_info_get(c, &info);
  out->off = 0;
  out->automatic = automatic;
  out->compressor = cspec;
  out->kind = info.name;
  snprintf(out->normalised, sizeof out->normalised, "%s%s", automatic ? auto_prefix : "",
           gs_compressor_spec(c));
  out->ef_decay = info.ef_decay;
  out->own_momentum = info.own_momentum;
  out->warmup = info.warmup;
  out->own_ef = info.own_ef;
  gs_compressor_destroy(c);
  return GS_OK;
}

/* DGC's momentum correction (Lin et al., ICLR 2018, Sec. 3.2, Eq. 6) keeps
 * u <- m u + g inside the compressor; an optimizer adding its own momentum
 * on top would apply it twice. So the optimizer's momentum moves in. */
gs_status gs_compress_spec_momentum(const gs_compress_spec *z, double optimizer,
                                    int nesterov, double compressor,
                                    gs_compress_momentum *out) {
  if (z == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "gs_compress_spec_momentum: NULL argument");
  const char *spec = z->normalised;
  const int given = !(compressor < 0);
  if (given && !(compressor < 1))
    return gs_error(GS_ERR_INVALID_ARG, "compression '%s': the compressor's momentum %g "
                    "is out of range (0 <= m < 1)", spec, compressor);
  *out = (gs_compress_momentum){
      .compressor = given ? (float)compressor : gs_compress_opts_default().momentum,
      .optimizer = (float)optimizer, .moved = 0};
  if (z->off || !z->own_momentum || optimizer == 0) return GS_OK;
  if (!(optimizer > 0 && optimizer < 1))
    return gs_error(GS_ERR_INVALID_ARG, "compression '%s': the optimizer's momentum %g "
                    "is out of range for the compressor's (0 <= m < 1)", spec, optimizer);
  if (nesterov)
    return gs_error(GS_ERR_INVALID_ARG, "compression '%s': %s applies plain momentum "
                    "inside the compressor (momentum correction), into which the "
                    "optimizer's Nesterov momentum %g cannot move: use plain momentum",
                    spec, z->kind, optimizer);
  /* Under auto: the plan keeps some groups dense, where nothing but the
   * optimizer applies momentum, and which groups those are changes with each
   * replan; one optimizer momentum cannot be both moved and kept, so the
   * combination is refused rather than training the dense groups without
   * the momentum that was asked for. */
  if (z->automatic)
    return gs_error(GS_ERR_INVALID_ARG, "compression '%s': %s applies momentum inside "
                    "the compressor (momentum correction), which would take the "
                    "optimizer's momentum %g from the groups the plan keeps dense too: "
                    "with auto:, give an optimizer momentum of 0 (the compressed groups "
                    "then use the compressor's), or compress every group with '%s'",
                    spec, z->kind, optimizer, z->compressor);
  if (given && (float)compressor != (float)optimizer)
    return gs_error(GS_ERR_INVALID_ARG, "compression '%s': the optimizer's momentum %g "
                    "and the compressor's momentum %g differ: %s applies momentum inside "
                    "the compressor (momentum correction), which takes the optimizer's; "
                    "give one of them", spec, optimizer, compressor, z->kind);
  out->compressor = (float)optimizer;
  out->optimizer = 0;
  out->moved = 1;
  return GS_OK;
}
