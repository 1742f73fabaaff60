/*
 * Fair shares and limits of users and accounts for one policy round
 * (policy.h, "Fair shares of users and accounts"): the manager's rounds and
 * the simulator's read the same serve options (gs_cluster_shares) the same
 * way. The tree's arithmetic is gs_cluster_account_tree_weights (policy.c);
 * this file numbers the round's users and accounts, looks up their shares
 * and limits by name, and lowers the shares of those that used more than
 * their share (the usage's decay and Slurm's classic factor 2^(-U/S)).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradsync/cluster_manager.h"
#include "gs_internal.h"
#include "policy.h"

/* NAME's entry of a NAME:N list ("*" for names not in it; 0: none). */
static int named_limit(const char *const *names, const int *nodes, int n, const char *name) {
  int any = 0;
  for (int k = 0; k < n; k++) {
    if (strcmp(names[k], name) == 0) return nodes[k];
    if (strcmp(names[k], "*") == 0) any = nodes[k];
  }
  return any;
}

int gs_cluster_shares_user_limit(const gs_cluster_shares *c, const char *user) {
  return c ? named_limit(c->limit_user, c->limit_nodes, c->nlimit, user) : 0;
}

int gs_cluster_shares_account_limit(const gs_cluster_shares *c, const char *account) {
  if (c == NULL || account == NULL || !account[0]) return 0;
  if (strchr(account, '/')) { /* a sub-account: its own entry only */
    for (int k = 0; k < c->naccount_limit; k++)
      if (strcmp(c->account_limit_name[k], account) == 0) return c->account_limit_nodes[k];
    return 0;
  }
  return named_limit(c->account_limit_name, c->account_limit_nodes, c->naccount_limit, account);
}

/* A user's share (--user-share; 1 for a user not named). */
static double user_share(const gs_cluster_shares *c, const char *user) {
  for (int k = 0; c && k < c->nshare; k++)
    if (strcmp(c->share_user[k], user) == 0) return c->share_w[k];
  return 1;
}

/* An account's share (--account-share; 1 for an account not named). */
static double account_share(const gs_cluster_shares *c, const char *account) {
  for (int k = 0; c && k < c->naccount; k++)
    if (strcmp(c->account_name[k], account) == 0) return c->account_w[k];
  return 1;
}

static const char *user_of(const char *const *users, int i) {
  const char *u = users ? users[i] : NULL;
  return u && *u ? u : "-";
}

static const char *account_of(const char *const *accounts, int i) {
  const char *a = accounts ? accounts[i] : NULL;
  return a ? a : "";
}

/* The round's accounts (gs_cluster_fairshare_round); returns how many. */
static int round_accounts(const gs_cluster_shares *c, gs_cluster_job *in, int n,
                          const char *const *accounts, gs_cluster_fairshare *fs) {
  int na = 0;
  char prefix[GS_CLUSTER_ACCOUNT_MAX];
  for (int i = 0; i < n; i++) {
    const char *path = account_of(accounts, i);
    int at = -1, levels = 0;
    for (size_t len = 0; path[len] && levels < GS_CLUSTER_ACCOUNT_LEVELS; levels++) {
      len += strcspn(path + len, "/"); /* the prefix path[0..len): one level more */
      int a = -1;
      for (int q = 0; q < na && a < 0; q++)
        if (fs->alen[q] == len && fs->aparent[q] == at && memcmp(fs->apath[q], path, len) == 0)
          a = q;
      if (a < 0) {
        a = na++;
        fs->apath[a] = path;
        fs->alen[a] = len;
        fs->aparent[a] = at;
        snprintf(prefix, sizeof prefix, "%.*s", (int)len, path);
        fs->alim[a] = gs_cluster_shares_account_limit(c, prefix);
        fs->ashare[a] = account_share(c, prefix);
      }
      at = a;
      if (path[len] == '/') len++;
    }
    in[i].account = at;
  }
  return na;
}

double gs_cluster_usage_decay(double usage, double nodes, double dt, double halflife_s) {
  double u;
  if (!(halflife_s > 0)) {
    u = usage + nodes * dt;
  } else {
    /* usage * 2^(-dt/H) + nodes * integral_0^dt 2^(-(dt-s)/H) ds */
    double keep = exp2(-dt / halflife_s);
    u = usage * keep + nodes * (halflife_s / 0.69314718055994530942) * (1 - keep);
  }
  return u > 0 && isfinite(u) ? u : 0;
}

/* Whether account path `path` is prefix[0..len) or under it. */
static int path_under(const char *path, const char *prefix, size_t len) {
  return strncmp(path, prefix, len) == 0 && (path[len] == '\0' || path[len] == '/');
}

static const char *usage_user(const gs_cluster_usage *u, int k) {
  const char *s = u->user ? u->user[k] : NULL;
  return s && *s ? s : "-";
}

static const char *usage_account(const gs_cluster_usage *u, int k) {
  const char *s = u->account ? u->account[k] : NULL;
  return s ? s : "";
}

/* Slurm's classic fair-share factor: an owner whose subtree used the part
 * `used` of its parent's usage, with the part `share` of its parent's
 * shares among the siblings with jobs. */
static double usage_factor(double used, double share) {
  if (!(used > 0) || !(share > 0)) return 1;
  double f = exp2(-used / share);
  return f > GS_CLUSTER_USAGE_FACTOR_MIN ? f : GS_CLUSTER_USAGE_FACTOR_MIN;
}

/* Lowers the round's account shares (fs->ashare) and the jobs' user shares
 * (share[i]) by their owners' usage (struct gs_cluster_usage); returns -1
 * out of memory (nothing changed). */
static int apply_usage(const gs_cluster_usage *u, const gs_cluster_job *in, int n,
                       const char *const *users, const char *const *accounts,
                       gs_cluster_fairshare *fs, double *share) {
  double total = 0;
  for (int k = 0; k < u->n; k++)
    if (u->node_s[k] > 0) total += u->node_s[k];
  if (!(total > 0)) return 0;
  int na = fs->naccounts;
  /* ua[a]: account a's subtree's usage; sib[p + 1]: the shares of parent
   * p's children with jobs (p = -1: the pool's); fa[a]: a's factor. */
  double *ua = gs_calloc((size_t)na + 1, sizeof *ua);
  double *sib = gs_calloc((size_t)na + 2, sizeof *sib);
  double *fa = gs_calloc((size_t)na + 1, sizeof *fa);
  double *fu = gs_calloc((size_t)n + 1, sizeof *fu);
  if (!ua || !sib || !fa || !fu) {
    gs_free(ua);
    gs_free(sib);
    gs_free(fa);
    gs_free(fu);
    return -1;
  }
  for (int a = 0; a < na; a++) {
    for (int k = 0; k < u->n; k++)
      if (u->node_s[k] > 0 && path_under(usage_account(u, k), fs->apath[a], fs->alen[a]))
        ua[a] += u->node_s[k];
    sib[fs->aparent[a] + 1] += fs->ashare[a];
  }
  /* A user node (a user in one account, or without one) is its first job. */
  for (int i = 0; i < n; i++) {
    int first = 1;
    for (int q = 0; q < i && first; q++)
      first = !(in[q].user == in[i].user && in[q].account == in[i].account);
    if (first) sib[in[i].account + 1] += share[i];
  }
  for (int a = 0; a < na; a++) {
    int p = fs->aparent[a];
    double up = p < 0 ? total : ua[p];
    fa[a] = up > 0 ? usage_factor(ua[a] / up, fs->ashare[a] / sib[p + 1]) : 1;
  }
  for (int i = 0; i < n; i++) {
    const char *user = user_of(users, i), *acct = account_of(accounts, i);
    int a = in[i].account;
    double own = 0, up = a < 0 ? total : ua[a];
    for (int k = 0; k < u->n; k++)
      if (u->node_s[k] > 0 && strcmp(usage_user(u, k), user) == 0 &&
          strcmp(usage_account(u, k), acct) == 0)
        own += u->node_s[k];
    fu[i] = up > 0 ? usage_factor(own / up, share[i] / sib[a + 1]) : 1;
  }
  for (int i = 0; i < n; i++) share[i] *= fu[i];
  for (int a = 0; a < na; a++) fs->ashare[a] *= fa[a];
  gs_free(ua);
  gs_free(sib);
  gs_free(fa);
  gs_free(fu);
  return 0;
}

void gs_cluster_fairshare_free(gs_cluster_fairshare *fs) {
  gs_free(fs->user_lim);
  gs_free(fs->aparent);
  gs_free(fs->alim);
  gs_free(fs->ashare);
  gs_free(fs->apath);
  gs_free(fs->alen);
  memset(fs, 0, sizeof *fs);
}

int gs_cluster_fairshare_round(const gs_cluster_shares *c, gs_cluster_job *in, int n,
                               const char *const *users, const char *const *accounts,
                               const gs_cluster_usage *usage, gs_cluster_fairshare *fs,
                               gs_cluster_policy_opts *opts) {
  memset(fs, 0, sizeof *fs);
  size_t amax = (size_t)(n > 0 ? n : 0) * GS_CLUSTER_ACCOUNT_LEVELS + 1;
  fs->user_lim = gs_calloc((size_t)(n > 0 ? n : 0) + 1, sizeof *fs->user_lim);
  fs->aparent = gs_calloc(amax, sizeof *fs->aparent);
  fs->alim = gs_calloc(amax, sizeof *fs->alim);
  fs->ashare = gs_calloc(amax, sizeof *fs->ashare);
  fs->apath = gs_calloc(amax, sizeof *fs->apath);
  fs->alen = gs_calloc(amax, sizeof *fs->alen);
  int *user = gs_malloc((size_t)n * sizeof *user + 1);
  double *share = gs_malloc((size_t)n * sizeof *share + 1);
  double *w = gs_malloc((size_t)n * sizeof *w + 1);
  double *out = gs_malloc((size_t)n * sizeof *out + 1);
  int *acct = gs_malloc((size_t)n * sizeof *acct + 1);
  int rc = 0;
  if (!fs->user_lim || !fs->aparent || !fs->alim || !fs->ashare || !fs->apath || !fs->alen ||
      !user || !share || !w || !out || !acct) {
    gs_cluster_fairshare_free(fs);
    for (int i = 0; i < n; i++) in[i].user = in[i].account = -1;
    rc = -1;
    goto done;
  }
  /* The users: each job's the index of the round's first job of its user. */
  for (int i = 0; i < n; i++) {
    const char *u = user_of(users, i);
    in[i].user = i;
    for (int q = 0; q < i && in[i].user == i; q++)
      if (strcmp(user_of(users, q), u) == 0) in[i].user = in[q].user;
    fs->user_lim[i] = in[i].user == i ? gs_cluster_shares_user_limit(c, u) : 0;
  }
  fs->naccounts = round_accounts(c, in, n, accounts, fs);
  /* The weights under the fair-share tree: the pool among the top-level
   * accounts and the users without one by their shares, an account's part
   * among its sub-accounts and its users, a user's among its jobs by
   * their weights. */
  for (int i = 0; i < n; i++) {
    user[i] = in[i].user;
    acct[i] = in[i].account;
    share[i] = user_share(c, user_of(users, i));
    w[i] = in[i].weight;
  }
  /* The usage lowers the shares of those that used more than theirs (out
   * of memory: the shares as given). */
  if (usage && usage->n > 0) (void)apply_usage(usage, in, n, users, accounts, fs, share);
  if (n > 0 && gs_cluster_account_tree_weights(n, acct, fs->naccounts, fs->aparent, fs->ashare,
                                               user, share, w, out) == 0)
    for (int i = 0; i < n; i++) in[i].weight = out[i];
  if (opts && c && c->nlimit > 0) {
    opts->nusers = n;
    opts->user_max_nodes = fs->user_lim;
  }
  if (opts && c && c->naccount_limit > 0) {
    opts->naccounts = fs->naccounts;
    opts->account_max_nodes = fs->alim;
    opts->account_parent = fs->aparent;
  }
done:
  gs_free(user);
  gs_free(share);
  gs_free(w);
  gs_free(out);
  gs_free(acct);
  return rc;
}
