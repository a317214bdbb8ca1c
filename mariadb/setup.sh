#!/usr/bin/env bash
# Sets up what ENGINE=RIPTIDE is built against and runs in, idempotently, on a Debian 12 machine:
#
#   1. deb-src entries for bookworm, bookworm-updates and bookworm-security (added if missing);
#   2. the MariaDB version V: the newest version of Debian's `mariadb` source package whose
#      source `apt-get source` can download (the newest binary sometimes has none);
#   3. the server package set at exactly V (a storage-engine plugin loads only into the server
#      version it was built for), with MyRocks, the test suite and the -dev headers;
#   4. the source of V unpacked into the cache directory, outside the repository.
#
# The cache directory is $RIPTIDE_MARIADB_CACHE (default /var/cache/riptide-mariadb). It ends up
# holding `env`, a shell fragment that sets MARIADB_VERSION (the Debian version), MARIADB_UPSTREAM
# (e.g. 10.11.18) and MARIADB_SOURCE (the unpacked tree); later runs read it and return at once
# when everything is in place. See ../shared/notes/mariadb-plugin-build.md for why each step.
set -euo pipefail

cache="${RIPTIDE_MARIADB_CACHE:-/var/cache/riptide-mariadb}"
mkdir -p "$cache"

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# The package set that has to move together, at one version.
packages=(
  mariadb-server mariadb-server-core mariadb-client mariadb-client-core mariadb-common
  mariadb-test mariadb-test-data mariadb-plugin-rocksdb
  mariadb-plugin-provider-bzip2 mariadb-plugin-provider-lz4 mariadb-plugin-provider-lzma
  mariadb-plugin-provider-lzo mariadb-plugin-provider-snappy
  libmariadbd-dev libmariadbd19 libmariadb-dev libmariadb-dev-compat libmariadb3
)

installed_at() {
  # True when every package of the set is installed at version $1.
  local version="$1" package
  for package in "${packages[@]}"; do
    [ "$(dpkg-query -W -f='${Version}' "$package" 2>/dev/null || true)" = "$version" ] || return 1
  done
}

if [ -f "$cache/env" ]; then
  # shellcheck disable=SC1091
  . "$cache/env"
  if [ -d "${MARIADB_SOURCE:-/nonexistent}/sql" ] && installed_at "$MARIADB_VERSION" \
    && command -v cmake >/dev/null && command -v g++ >/dev/null; then
    echo "mariadb/setup.sh: MariaDB $MARIADB_VERSION installed, source in $MARIADB_SOURCE"
    exit 0
  fi
fi

export DEBIAN_FRONTEND=noninteractive

# 1. deb-src entries.
sources=/etc/apt/sources.list.d/riptide-deb-src.sources
if ! grep -rqs "deb-src" /etc/apt/sources.list /etc/apt/sources.list.d/; then
  as_root tee "$sources" >/dev/null <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  as_root apt-get update -qq
elif ! apt-cache showsrc mariadb >/dev/null 2>&1; then
  as_root apt-get update -qq
fi

# Tools: unpacking a source package needs dpkg-dev; the plugin build needs cmake and g++.
missing_tools=()
command -v dpkg-source >/dev/null || missing_tools+=(dpkg-dev)
command -v cmake >/dev/null || missing_tools+=(cmake)
command -v g++ >/dev/null || missing_tools+=(g++)
command -v make >/dev/null || missing_tools+=(make)
if [ "${#missing_tools[@]}" -gt 0 ]; then
  as_root apt-get install -y -qq "${missing_tools[@]}"
fi

# 2. The newest version whose source downloads.
mapfile -t versions < <(apt-cache madison mariadb-server | awk -F'|' '{gsub(/ /, "", $2); print $2}' | sort -u -r -V)
version=""
for candidate in "${versions[@]}"; do
  upstream="${candidate#*:}"
  upstream="${upstream%%-*}"
  if [ -d "$cache/mariadb-$upstream/sql" ]; then
    version="$candidate"
    break
  fi
  echo "mariadb/setup.sh: trying the source of mariadb $candidate"
  if (cd "$cache" && apt-get source -qq "mariadb=$candidate" >"$cache/source-$upstream.log" 2>&1); then
    version="$candidate"
    break
  fi
  echo "mariadb/setup.sh: no source for $candidate (see $cache/source-$upstream.log)"
done
if [ -z "$version" ]; then
  echo "mariadb/setup.sh: no MariaDB version with downloadable source among: ${versions[*]}" >&2
  exit 1
fi
upstream="${version#*:}"
upstream="${upstream%%-*}"
source_dir="$cache/mariadb-$upstream"
[ -d "$source_dir/sql" ] || { echo "mariadb/setup.sh: $source_dir was not unpacked" >&2; exit 1; }

# 3. The package set at that version (downgrading if a newer one is installed). Packages do not
# start a system server here (policy-rc.d); `make sql` starts a private one.
if ! installed_at "$version"; then
  pinned=()
  for package in "${packages[@]}"; do pinned+=("$package=$version"); done
  as_root apt-get install -y -qq --allow-downgrades "${pinned[@]}"
fi

cat >"$cache/env" <<EOF
MARIADB_VERSION='$version'
MARIADB_UPSTREAM='$upstream'
MARIADB_SOURCE='$source_dir'
EOF
echo "mariadb/setup.sh: MariaDB $version installed, source in $source_dir"
