/*
 * OpenBLAS's kernels for this CPU.
 *
 * OpenBLAS picks its kernels when it is loaded, from the CPU's family and
 * model. Debian's 0.3.21 does not know CPUs newer than itself and falls back
 * to its oldest x86-64 kernels (Prescott: SSE3): on the Xeon of family 6,
 * model 207 that these benchmarks ran on, that made the C CNN's training step
 * 4.2x slower (216 against 917 images/s, bench/nn) and PyTorch's, which uses
 * the same library, 1.5x. The choice cannot be changed once the library is
 * loaded, so cli_blas_check runs first in main: when OPENBLAS_CORETYPE is
 * unset and the chosen kernels use less of the vector unit than the CPU has
 * (AVX2 with FMA, or AVX-512), it sets OPENBLAS_CORETYPE to the kernels made
 * for that (Haswell, SkylakeX) and executes the program again. Ranks that
 * `gradsync run` starts inherit the variable, Python ones too. A variable
 * the user set is left alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

char *openblas_get_corename(void);

/* Vector width a kernel family uses: 0 SSE, 1 AVX, 2 AVX2 + FMA, 3 AVX-512. */
static int core_level(const char *name) {
  static const char *const sse[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem",
                                    "Atom", "Opteron", "Opteron(SSE3)", "Barcelona",
                                    "Bobcat", "Nano", "Katmai", "Coppermine",
                                    "Northwood", "Banias", "Athlon", NULL};
  static const char *const avx[] = {"Sandybridge", "Bulldozer", "Piledriver",
                                    "Steamroller", "Excavator", NULL};
  static const char *const avx2[] = {"Haswell", "Zen", NULL};
  static const char *const avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids", NULL};
  const char *const *lists[] = {sse, avx, avx2, avx512};
  for (int level = 0; level < 4; level++)
    for (const char *const *n = lists[level]; *n; n++)
      if (strcasecmp(name, *n) == 0) return level;
  return -1; /* a name not listed: trust OpenBLAS */
}

static int cpu_level(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return 3;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 2;
  if (__builtin_cpu_supports("avx")) return 1;
#endif
  return 0;
}

const char *cli_blas_core(void) {
  const char *name = openblas_get_corename();
  return name ? name : "unknown";
}

/* The OPENBLAS_CORETYPE cli_blas_check would set, or NULL. */
static const char *better_core(void) {
  const char *set = getenv("OPENBLAS_CORETYPE");
  if (set != NULL && *set != '\0') return NULL;
  int have = core_level(cli_blas_core()), can = cpu_level();
  if (have < 0 || have >= can || can < 2) return NULL;
  return can == 3 ? "SkylakeX" : "Haswell";
}

void cli_blas_check(char **argv) {
  const char *core = better_core();
  if (core == NULL) return;
  if (setenv("OPENBLAS_CORETYPE", core, 1) != 0) return;
  execv("/proc/self/exe", argv);
  /* Not fatal: the program still works with the slower kernels. */
  fprintf(stderr, "gradsync: warning: OpenBLAS uses %s kernels on a CPU that has more; "
          "set OPENBLAS_CORETYPE=%s for its faster ones\n", cli_blas_core(), core);
  unsetenv("OPENBLAS_CORETYPE");
}
