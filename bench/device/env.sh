# shellcheck shell=bash
# Source it on the lent machine after unpacking bench/device/bundle.sh's
# archive into $GS_BUNDLE (default /tmp/gs): puts the bundle's gradsync,
# mpirun, ip and tc first, its libraries on the loader's path, and points
# Open MPI and PMIx at their relocated trees (OPAL_DESTDIR, PMIX_DESTDIR),
# so the machine's own files are neither used nor replaced.
GS_BUNDLE=${GS_BUNDLE:-/tmp/gs}
export PATH="$GS_BUNDLE/bin:$GS_BUNDLE/usr/bin:$PATH"
export LD_LIBRARY_PATH="$GS_BUNDLE/lib:$GS_BUNDLE/usr/lib/x86_64-linux-gnu/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OPAL_DESTDIR="$GS_BUNDLE" PMIX_DESTDIR="$GS_BUNDLE"
export PMIX_MCA_mca_base_component_path="$GS_BUNDLE/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix"
# gradsync run takes ip and tc from the system's directories only (it runs
# them as root); where the machine has none, a wrapper there runs ours.
for t in ip tc; do
  if ! [ -x /usr/sbin/$t ] && ! [ -x /sbin/$t ] && ! [ -x /usr/bin/$t ] && ! [ -x /bin/$t ]; then
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/lib exec %s/bin/%s "$@"\n' "$GS_BUNDLE" "$GS_BUNDLE" "$t" \
      > /usr/sbin/$t && chmod +x /usr/sbin/$t
  fi
done
