#!/usr/bin/env bash
# Installs the Debian packages baton needs, only those that are missing, and
# selects the OpenMP build of OpenBLAS as the system BLAS/LAPACK (LibTorch on
# Debian otherwise runs on reference BLAS, ~30x slower).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libcaf-dev libtorch-dev libcapnp-dev capnproto
  libspdlog-dev libfmt-dev libyaml-cpp-dev nlohmann-json3-dev
  googletest libgtest-dev libssl-dev zlib1g-dev
  libstb-dev # decodes and resizes PNG/JPEG for data.kind: image-folder
  dataset-fashion-mnist libopenblas0-openmp
  python3-torch procps iproute2
  clang libclang-rt-14-dev lld # lld links the ~100 executables in a tenth of GNU ld's time
  slurm-wlm munge # a single-host Slurm cluster for slurm_launch_test (started by the test)
  gnuplot-nox # draws the plots of baton report (SVG terminal)
  chromium python3-jsonschema # report_browser_test renders the report; report_test checks its schema
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi

# Installing munge and Slurm must not start their daemons (the Slurm test
# starts its own and stops them): where no policy-rc.d forbids starting
# services (containers usually have one), one does during the install.
policy=/usr/sbin/policy-rc.d
forbid_services() {
  [[ -e $policy ]] && return
  printf '#!/bin/sh\n# written by baton scripts/install-deps.sh during apt-get install\nexit 101\n' |
    "${sudo_cmd[@]}" tee "$policy" >/dev/null
  "${sudo_cmd[@]}" chmod 755 "$policy"
  trap '"${sudo_cmd[@]}" rm -f "$policy"' EXIT
}

if ((${#missing[@]})); then
  echo "baton: installing ${#missing[@]} missing Debian packages: ${missing[*]}"
  forbid_services
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "baton: all Debian packages present"
fi

# Select OpenBLAS (OpenMP build): honours torch::set_num_threads.
openblas=/usr/lib/x86_64-linux-gnu/openblas-openmp
for lib in libblas.so.3 liblapack.so.3; do
  current=$(update-alternatives --query "${lib}-x86_64-linux-gnu" 2>/dev/null | awk '/^Value:/{print $2}')
  if [[ "$current" != "$openblas/$lib" ]]; then
    "${sudo_cmd[@]}" update-alternatives --set "${lib}-x86_64-linux-gnu" "$openblas/$lib"
  fi
done
echo "baton: BLAS = $(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3)"
