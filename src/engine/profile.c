/*
 * Model profiles: the JSON file shared by the planner, the replay trainer and
 * the simulator (docs/PLANNING.md, "Profiles"). Parsing goes through cJSON;
 * every error names the file and the field, so a user can fix the file
 * without reading this code.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gradsync/plan.h"
#include "gs_internal.h"

/* Largest numel we accept: integers up to 2^53 are exact in a JSON double. */
#define PROFILE_MAX_NUMEL 9007199254740992.0
/* Largest profile file we read: the largest model's (DenseNet-201) is
 * 70 KiB, so 64 MiB leaves room for models a thousand times larger. */
#define PROFILE_MAX_BYTES (64 << 20)

static char *profile_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = gs_malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

void gs_profile_free(gs_profile *p) {
  if (p == NULL) return;
  if (p->tensors) {
    for (size_t i = 0; i < p->ntensors; i++) gs_free(p->tensors[i].name);
    gs_free(p->tensors);
  }
  gs_free(p->name);
  gs_free(p->device);
  gs_free(p->source);
  gs_free(p);
}

size_t gs_profile_tensor_bytes(const gs_profile *p, size_t i) {
  if (p == NULL || i >= p->ntensors) return 0;
  return p->tensors[i].numel * gs_dtype_size(p->tensors[i].dtype);
}

double gs_profile_fold_step(const uint64_t *ready_ns, size_t n, uint64_t start_ns,
                            double *backward_s) {
  if (n == 0) return 0;
  uint64_t r = ready_ns[n - 1];
  double fwd = ((double)r - (double)start_ns) * 1e-9;
  for (size_t c = n - 1; c-- > 0;) {
    uint64_t rc = r > ready_ns[c] ? r : ready_ns[c];
    backward_s[c] += (double)(rc - r) * 1e-9;
    r = rc;
  }
  return fwd;
}

/* Line and column of byte `off` in `text`, for JSON syntax errors. */
static void text_position(const char *text, size_t off, int *line, int *col) {
  *line = 1;
  *col = 1;
  for (size_t i = 0; i < off && text[i]; i++) {
    if (text[i] == '\n') {
      (*line)++;
      *col = 1;
    } else {
      (*col)++;
    }
  }
}

/* A required or optional string member; "" when optional and absent. */
static gs_status get_string(const cJSON *obj, const char *key, int required,
                            const char *origin, const char *where, char **out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (v == NULL) {
    if (required)
      return gs_error(GS_ERR_PARSE, "%s: %s%s: missing (expected a string)",
                      origin, where, key);
    *out = profile_strdup("");
    return *out ? GS_OK : GS_ERR_NOMEM;
  }
  if (!cJSON_IsString(v) || v->valuestring == NULL)
    return gs_error(GS_ERR_PARSE, "%s: %s%s: expected a string", origin, where,
                    key);
  *out = profile_strdup(v->valuestring);
  return *out ? GS_OK : GS_ERR_NOMEM;
}

/* A required non-negative finite number. */
static gs_status get_seconds(const cJSON *obj, const char *key,
                             const char *origin, const char *where, double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (v == NULL)
    return gs_error(GS_ERR_PARSE, "%s: %s%s: missing (expected seconds >= 0)",
                    origin, where, key);
  if (!cJSON_IsNumber(v))
    return gs_error(GS_ERR_PARSE, "%s: %s%s: expected a number of seconds",
                    origin, where, key);
  if (!isfinite(v->valuedouble) || v->valuedouble < 0)
    return gs_error(GS_ERR_PARSE, "%s: %s%s: expected seconds >= 0, got %g",
                    origin, where, key, v->valuedouble);
  *out = v->valuedouble;
  return GS_OK;
}

static gs_status parse_tensor(const cJSON *t, size_t i, const char *origin,
                              gs_profile_tensor *out) {
  char where[64];
  snprintf(where, sizeof where, "tensors[%zu].", i);
  if (!cJSON_IsObject(t))
    return gs_error(GS_ERR_PARSE, "%s: tensors[%zu]: expected an object", origin,
                    i);
  GS_CHECK(get_string(t, "name", 1, origin, where, &out->name));
  const cJSON *n = cJSON_GetObjectItemCaseSensitive(t, "numel");
  if (n == NULL)
    return gs_error(GS_ERR_PARSE,
                    "%s: %snumel: missing (expected a positive integer)", origin,
                    where);
  /* From 2^53 on, a double no longer tells neighbouring integers apart:
   * 9007199254740993 would be read as 2^53 and planned as such. */
  if (!cJSON_IsNumber(n) || !isfinite(n->valuedouble) || n->valuedouble < 1 ||
      n->valuedouble != floor(n->valuedouble) ||
      n->valuedouble >= PROFILE_MAX_NUMEL)
    return gs_error(GS_ERR_PARSE,
                    "%s: %snumel: expected a positive integer below 2^53, got %s", origin,
                    where, cJSON_IsNumber(n) ? "another number" : "a non-number");
  out->numel = (size_t)n->valuedouble;
  out->dtype = GS_F32;
  const cJSON *d = cJSON_GetObjectItemCaseSensitive(t, "dtype");
  if (d != NULL) {
    if (!cJSON_IsString(d) || d->valuestring == NULL)
      return gs_error(GS_ERR_PARSE, "%s: %sdtype: expected a string", origin,
                      where);
    if (gs_dtype_parse(d->valuestring, &out->dtype) != GS_OK)
      return gs_error(GS_ERR_PARSE,
                      "%s: %sdtype: unknown dtype '%s' (expected f32, f64, f16, "
                      "bf16, i32, i64 or u8)", origin, where, d->valuestring);
  }
  size_t bytes;
  if (gs_mul_size(out->numel, gs_dtype_size(out->dtype), &bytes) != GS_OK)
    return gs_error(GS_ERR_PARSE, "%s: %snumel: %zu elements overflow size_t",
                    origin, where, out->numel);
  GS_CHECK(get_seconds(t, "backward_s", origin, where, &out->backward_s));
  return GS_OK;
}

static gs_status parse_root(const cJSON *root, const char *origin,
                            gs_profile *p) {
  if (!cJSON_IsObject(root))
    return gs_error(GS_ERR_PARSE, "%s: expected a JSON object at the top level",
                    origin);
  GS_CHECK(get_string(root, "name", 1, origin, "", &p->name));
  GS_CHECK(get_string(root, "device", 0, origin, "", &p->device));
  GS_CHECK(get_string(root, "source", 0, origin, "", &p->source));
  GS_CHECK(get_seconds(root, "forward_s", origin, "", &p->forward_s));
  const cJSON *bs = cJSON_GetObjectItemCaseSensitive(root, "batch_size");
  if (bs != NULL) {
    if (!cJSON_IsNumber(bs) || bs->valuedouble < 1 || bs->valuedouble > 1e9 ||
        bs->valuedouble != floor(bs->valuedouble))
      return gs_error(GS_ERR_PARSE, "%s: batch_size: expected a positive integer",
                      origin);
    p->batch_size = (int)bs->valuedouble;
  }
  const cJSON *ts = cJSON_GetObjectItemCaseSensitive(root, "tensors");
  if (ts == NULL)
    return gs_error(GS_ERR_PARSE,
                    "%s: tensors: missing (expected an array of tensors)", origin);
  if (!cJSON_IsArray(ts) || cJSON_GetArraySize(ts) < 1)
    return gs_error(GS_ERR_PARSE, "%s: tensors: expected a non-empty array",
                    origin);
  size_t n = (size_t)cJSON_GetArraySize(ts);
  p->tensors = gs_calloc(n, sizeof *p->tensors);
  if (p->tensors == NULL) return GS_ERR_NOMEM;
  p->ntensors = n;
  size_t i = 0;
  const cJSON *t;
  cJSON_ArrayForEach(t, ts) {
    GS_CHECK(parse_tensor(t, i, origin, &p->tensors[i]));
    i++;
  }
  return GS_OK;
}

/* The first key found twice in one object of the tree under o, or NULL. */
static const char *duplicate_key(const cJSON *o) {
  for (const cJSON *a = o ? o->child : NULL; a; a = a->next) {
    if (cJSON_IsObject(o))
      for (const cJSON *b = o->child; b != a; b = b->next)
        if (a->string && b->string && strcmp(a->string, b->string) == 0) return a->string;
    const char *in = duplicate_key(a);
    if (in) return in;
  }
  return NULL;
}

gs_status gs_profile_parse(const char *json, const char *origin,
                           gs_profile **out) {
  if (out) *out = NULL;
  if (json == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "profile parse: NULL argument");
  if (origin == NULL) origin = "<profile>";
  /* One JSON value and nothing after it but white space. */
  const char *at = NULL;
  cJSON *root = cJSON_ParseWithOpts(json, &at, 1);
  if (root == NULL) {
    int line = 0, col = 0;
    if (at != NULL && at >= json && at <= json + strlen(json))
      text_position(json, (size_t)(at - json), &line, &col);
    return gs_error(GS_ERR_PARSE, "%s: invalid JSON near line %d, column %d (or text after "
                    "its value)", origin, line, col);
  }
  const char *dup = duplicate_key(root);
  if (dup != NULL) {
    gs_status bad = gs_error(GS_ERR_PARSE, "%s: the key \"%.64s\" given twice in one object "
                             "(which one is meant cannot be told)", origin, dup);
    cJSON_Delete(root);
    return bad;
  }
  gs_profile *p = gs_calloc(1, sizeof *p);
  if (p == NULL) {
    cJSON_Delete(root);
    return GS_ERR_NOMEM;
  }
  gs_status st = parse_root(root, origin, p);
  cJSON_Delete(root);
  if (st != GS_OK) {
    gs_profile_free(p);
    return st;
  }
  *out = p;
  return GS_OK;
}

gs_status gs_profile_load(const char *path, gs_profile **out) {
  if (out) *out = NULL;
  if (path == NULL || out == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "profile load: NULL argument");
  char *text = NULL;
  gs_status st = gs__read_text(path, "profile", PROFILE_MAX_BYTES, &text, NULL);
  if (st == GS_OK) st = gs_profile_parse(text, path, out);
  gs_free(text);
  return st;
}

gs_status gs_profile_validate(const gs_profile *p) {
  if (p == NULL) return gs_error(GS_ERR_INVALID_ARG, "profile: NULL");
  const char *name = p->name ? p->name : "<profile>";
  if (p->ntensors == 0 || p->tensors == NULL)
    return gs_error(GS_ERR_INVALID_ARG, "%s: tensors: expected a non-empty array",
                    name);
  if (!isfinite(p->forward_s) || p->forward_s < 0)
    return gs_error(GS_ERR_INVALID_ARG, "%s: forward_s: expected seconds >= 0",
                    name);
  for (size_t i = 0; i < p->ntensors; i++) {
    const gs_profile_tensor *t = &p->tensors[i];
    if (t->numel == 0)
      return gs_error(GS_ERR_INVALID_ARG,
                      "%s: tensors[%zu].numel: expected a positive integer", name, i);
    if (gs_dtype_size(t->dtype) == 0)
      return gs_error(GS_ERR_INVALID_ARG, "%s: tensors[%zu].dtype: unknown dtype",
                      name, i);
    if (!isfinite(t->backward_s) || t->backward_s < 0)
      return gs_error(GS_ERR_INVALID_ARG,
                      "%s: tensors[%zu].backward_s: expected seconds >= 0", name, i);
  }
  return GS_OK;
}

char *gs_profile_to_json(const gs_profile *p) {
  if (p == NULL) return NULL;
  cJSON *root = cJSON_CreateObject(), *ts = NULL;
  int ok = root != NULL;
  ok = ok && cJSON_AddStringToObject(root, "name", p->name ? p->name : "") != NULL;
  if (ok && p->batch_size > 0) ok = cJSON_AddNumberToObject(root, "batch_size", p->batch_size) != NULL;
  ok = ok && cJSON_AddStringToObject(root, "device", p->device ? p->device : "") != NULL;
  ok = ok && cJSON_AddStringToObject(root, "source", p->source ? p->source : "") != NULL;
  ok = ok && cJSON_AddNumberToObject(root, "forward_s", p->forward_s) != NULL;
  ok = ok && (ts = cJSON_AddArrayToObject(root, "tensors")) != NULL;
  for (size_t i = 0; ok && i < p->ntensors; i++) {
    const gs_profile_tensor *t = &p->tensors[i];
    cJSON *o = cJSON_CreateObject();
    ok = o != NULL && cJSON_AddItemToArray(ts, o);
    ok = ok && cJSON_AddStringToObject(o, "name", t->name ? t->name : "") != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "numel", (double)t->numel) != NULL;
    ok = ok && cJSON_AddStringToObject(o, "dtype", gs_dtype_name(t->dtype)) != NULL;
    ok = ok && cJSON_AddNumberToObject(o, "backward_s", t->backward_s) != NULL;
  }
  char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
  cJSON_Delete(root);
  if (text == NULL) return NULL;
  /* cJSON's allocator may not be gs_malloc's: hand back a copy of ours */
  size_t n = strlen(text) + 1;
  char *out = gs_malloc(n);
  if (out) memcpy(out, text, n);
  cJSON_free(text);
  return out;
}
