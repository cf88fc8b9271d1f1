#!/usr/bin/env bash
# Packs what scripts/gpu_check.sh needs on a GPU machine that has no package manager and takes at
# most 64 MiB of the working tree along: gpu-bundle/ (gitignored; carry it), about 38 MiB.
#   bin/      weft and the test binaries with Vulkan tests (device_tests, runtime_tests, cli_tests), stripped
#   lib/      every library they link outside glibc and libstdc++ (ldd), and the Vulkan loader libvulkan.so.1
#             (weft dlopens it, so ldd does not list it)
#   lib/cxx/  libstdc++ and libgcc_s, used there only when the machine's own are missing or too old
#   lib/driver/  what NVIDIA's Vulkan library (libGLX_nvidia.so.0) links or dlopens and a bare image may
#             lack (glvnd's libEGL.so.1, without which its vk_icdGetInstanceProcAddr answers nothing,
#             libGLdispatch, libX11 and its chain), searched after the machine's own
#   layers/   the Khronos validation layer (gzipped; the Vulkan tests run under it) and its manifest
#   models/   stories260K.gguf (the equality tests' trained model)
#   bundle.env  the commit, and the absolute paths the test binaries were built with (WEFT_BINARY,
#             WEFT_SHARED_DIR), which gpu_check.sh recreates there as links into the bundle
# Then it proves the bundle stands alone: a copy in a scratch directory, run with LD_LIBRARY_PATH
# only, loads every library from the copy, glibc and the Vulkan driver (the machine's) aside.
#   BUILD_DIR=build  OUT_DIR=gpu-bundle  NO_BUILD=1 (pack what build/ holds)  NO_SELF_TEST=1
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
BUILD_DIR=${BUILD_DIR:-build}
OUT_DIR=${OUT_DIR:-gpu-bundle}
bins=("$BUILD_DIR/weft" "$BUILD_DIR/tests/device_tests" "$BUILD_DIR/tests/runtime_tests" "$BUILD_DIR/tests/cli_tests")

if [ -z "${NO_BUILD:-}" ]; then
  flock /tmp/weft-build.lock cmake --build "$BUILD_DIR" --target weft device_tests runtime_tests cli_tests
fi
grep -q '^WEFT_VULKAN:BOOL=ON' "$BUILD_DIR/CMakeCache.txt" || { echo "gpu_bundle: $BUILD_DIR is built without Vulkan" >&2; exit 1; }
for b in "${bins[@]}"; do [ -x "$b" ] || { echo "gpu_bundle: no $b" >&2; exit 1; }; done

rm -rf "$OUT_DIR"
mkdir -p "$OUT_DIR"/{bin,lib/cxx,lib/driver,layers,models}
for b in "${bins[@]}"; do strip --strip-unneeded -o "$OUT_DIR/bin/$(basename "$b")" "$b"; done

# glibc's own libraries: every Linux has them, and a second copy must not be mixed with the host's.
glibc='^(linux-vdso|libc|libm|libdl|librt|libpthread|ld-linux-x86-64|libresolv|libutil)\.so'
copy_deps() {  # the libraries ldd resolves for $1, glibc aside; libstdc++/libgcc_s to lib/cxx
  ldd "$1" | awk '/=> \// { print $1, $3 }' | while read -r name path; do
    if [[ $name =~ $glibc ]]; then continue; fi
    case $name in
      libstdc++.so.*|libgcc_s.so.*) cp -L "$path" "$OUT_DIR/lib/cxx/$name" ;;
      *) cp -L "$path" "$OUT_DIR/lib/$name" ;;
    esac
  done
}
for b in "$OUT_DIR"/bin/*; do copy_deps "$b"; done

loader=$(ldconfig -p | awk '/libvulkan\.so\.1 .*x86-64/ && !n++ { print $NF }')
[ -n "$loader" ] || { echo "gpu_bundle: no libvulkan.so.1 here (apt-get install libvulkan1)" >&2; exit 1; }
cp -L "$loader" "$OUT_DIR/lib/libvulkan.so.1"

for name in libEGL.so.1 libGLdispatch.so.0 libX11.so.6 libXext.so.6 libxcb.so.1 libXau.so.6 libXdmcp.so.6 libbsd.so.0 libmd.so.0; do
  path=$(ldconfig -p | awk -v n="$name" '$1 == n && /x86-64/ && !k++ { print $NF }')
  if [ -n "$path" ]; then cp -L "$path" "$OUT_DIR/lib/driver/"; else echo "gpu_bundle: no $name here to carry" >&2; fi
done

layer_json=""
for d in /usr/share/vulkan/explicit_layer.d /etc/vulkan/explicit_layer.d; do
  [ -f "$d/VkLayer_khronos_validation.json" ] && layer_json="$d/VkLayer_khronos_validation.json" && break
done
if [ -n "$layer_json" ]; then
  layer_so=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["layer"]["library_path"])' "$layer_json")
  [[ $layer_so == /* ]] || layer_so=$(ldconfig -p | awk -v n="$layer_so" '$1 == n && !k++ { print $NF }')
  gzip -c "$layer_so" > "$OUT_DIR/layers/libVkLayer_khronos_validation.so.gz"
  # The manifest names the library beside it (a relative path is relative to the manifest).
  python3 - "$layer_json" "$OUT_DIR/layers/VkLayer_khronos_validation.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
m["layer"]["library_path"] = "./libVkLayer_khronos_validation.so"
json.dump(m, open(sys.argv[2], "w"), indent=1)
EOF
  copy_deps "$layer_so"
else
  echo "gpu_bundle: no validation layer here (vulkan-validationlayers): the Vulkan tests will not run there" >&2
fi

shared="$root/../shared"
cp "$shared/models/stories260K.gguf" "$OUT_DIR/models/"
# The paths the test binaries carry (tests/CMakeLists.txt's WEFT_BINARY and WEFT_SHARED_DIR).
test_binary=$(grep -m1 -ao 'WEFT_BINARY=[^ ]*' "$BUILD_DIR/build.ninja" | sed -n '1{s/^WEFT_BINARY=\\"//; s/\\"$//; p}')
test_shared=$(grep -m1 -ao 'WEFT_SHARED_DIR=[^ ]*' "$BUILD_DIR/build.ninja" | sed -n '1{s/^WEFT_SHARED_DIR=\\"//; s/\\"$//; p}')
{
  echo "WEFT_BUNDLE_COMMIT=$(git rev-parse --short=8 HEAD)$(git diff --quiet HEAD -- src apps || echo +dirty)"
  echo "WEFT_BUNDLE_DATE=$(date -u +%FT%TZ)"
  echo "WEFT_TEST_BINARY=$test_binary"
  echo "WEFT_TEST_SHARED_DIR=$test_shared"
} > "$OUT_DIR/bundle.env"
du -sh "$OUT_DIR" | awk '{ print "gpu_bundle: " $2 ", " $1 }'
bytes=$(du -sb "$OUT_DIR" | cut -f1)
if [ "$bytes" -gt $((56 << 20)) ]; then
  echo "gpu_bundle: over 56 MiB: with the working tree it would pass the 64 MiB a device run carries" >&2
  exit 1
fi

[ -n "${NO_SELF_TEST:-}" ] && exit 0
# The self-test: from a copy elsewhere, every library the binaries link resolves inside the copy
# (or is glibc, or libstdc++/libgcc_s from the system), and weft's run-time loads take the copy's
# Vulkan loader; only the driver's own files (the ICD and what it links) come from the system.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp -r "$OUT_DIR" "$scratch/b"
export LD_LIBRARY_PATH="$scratch/b/lib"
bad=0
for b in "$scratch"/b/bin/*; do
  while read -r name path; do
    if [[ $name =~ $glibc ]] || [[ $name == libstdc++* ]] || [[ $name == libgcc_s* ]]; then continue; fi
    if [[ $path != "$scratch"/b/lib/* ]]; then echo "gpu_bundle: $(basename "$b") takes $name from $path" >&2; bad=1; fi
  done < <(ldd "$b" | awk '/=>/ { print $1, $3 }')
done
loaded=$(LD_DEBUG=libs "$scratch/b/bin/weft" info --devices 2>&1 >/dev/null | sed -n 's/.*calling init: //p' | sort -u)
echo "$loaded" | grep -q "^$scratch/b/lib/libvulkan.so.1$" ||
  { echo "gpu_bundle: weft did not load the bundle's libvulkan.so.1:" >&2; echo "$loaded" >&2; bad=1; }
system=$(echo "$loaded" | grep -v "^$scratch/b/lib/")
echo "gpu_bundle: from the system: glibc and libstdc++, and the Vulkan drivers:" \
  "$(echo "$system" | grep -E 'vulkan_|nvidia|lvp' | xargs -n1 basename | tr '\n' ' ')" \
  "with $(echo "$system" | grep -vcE 'vulkan_|nvidia|lvp|/(libc|libm|libstdc\+\+|libgcc_s|ld-linux-x86-64|libpthread|libdl|librt)\.so') libraries they link"
"$scratch/b/bin/weft" info --devices | sed 's/^/gpu_bundle: /'
[ "$bad" = 0 ] && echo "gpu_bundle: self-test passed (a copy in $scratch ran on LD_LIBRARY_PATH alone)"
exit "$bad"
