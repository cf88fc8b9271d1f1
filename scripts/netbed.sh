#!/usr/bin/env bash
# A network on one machine, for the tests and benchmarks of weft across hosts: N hosts, each a
# network namespace with one veth into a bridge; the caller's namespace is on the bridge too
# (10.213.S.1), host i is 10.213.S.(i+1). A profile shapes every link in both directions with tc:
# `tbf` for the rate and, where the kernel has sch_netem, `netem` for the one-way delay (a kernel
# without it gets the rate only, and the script says so on stderr).
#   scripts/netbed.sh up TAG N [PROFILE]   # prints "NAMESPACE ADDRESS" per host
#   scripts/netbed.sh down TAG N
#   scripts/netbed.sh profiles              # name delay rate, one per line
# TAG: a number (0..9999) that keeps concurrent beds apart; PROFILE: see profiles (default none).
# Needs root (ip netns); exits 2 with a message where namespaces or bridges are not permitted.
set -euo pipefail

profiles() {
  echo "none 0 0"
  echo "25us-10gbit 25us 10gbit"
  echo "100us-10gbit 100us 10gbit"
  echo "200us-1gbit 200us 1gbit"
}

names() {  # TAG I -> namespace, host-side veth, bridge-side veth, bridge
  echo "wnb$1_$2 wnh$1_$2 wnp$1_$2 wnbr$1"
}

shape() {  # NETNS_PREFIX DEV DELAY RATE (NETNS_PREFIX: "" or "ip netns exec NS")
  local run=$1 dev=$2 delay=$3 rate=$4
  [ "$rate" = 0 ] && return 0
  # Burst of 1 ms at the rate (at least 64 KiB): what a real NIC passes back to back.
  local bits=${rate%gbit}
  local burst=$((bits * 1000000000 / 8 / 1000))
  [ "$burst" -lt 65536 ] && burst=65536
  if $run tc qdisc add dev "$dev" root handle 1: netem delay "$delay" 2>/dev/null; then
    $run tc qdisc add dev "$dev" parent 1: handle 2: tbf rate "$rate" burst "$burst" latency 50ms
  else
    [ -n "${NETBED_WARNED:-}" ] || echo "netbed: this kernel has no sch_netem: delay $delay not applied, rate only" >&2
    NETBED_WARNED=1
    $run tc qdisc add dev "$dev" root tbf rate "$rate" burst "$burst" latency 50ms
  fi
}

up() {
  local tag=$1 n=$2 profile=${3:-none}
  local line delay rate
  line=$(profiles | awk -v p="$profile" '$1 == p') || true
  [ -n "$line" ] || { echo "netbed: unknown profile '$profile' (scripts/netbed.sh profiles)" >&2; exit 1; }
  read -r _ delay rate <<<"$line"
  local subnet="10.213.$((tag % 250))"
  read -r _ _ _ br <<<"$(names "$tag" 0)"
  if [ "$(id -u)" != 0 ] || ! ip link add "$br" type bridge 2>/dev/null; then
    echo "netbed: network namespaces and bridges are not permitted here (needs root)" >&2
    exit 2
  fi
  ip addr add "$subnet.1/24" dev "$br"
  ip link set "$br" up
  for i in $(seq 1 "$n"); do
    read -r ns host port _ <<<"$(names "$tag" "$i")"
    ip netns add "$ns"
    ip link add "$port" type veth peer name "$host"
    ip link set "$host" netns "$ns"
    ip link set "$port" master "$br" up
    ip -n "$ns" addr add "$subnet.$((i + 1))/24" dev "$host"
    ip -n "$ns" link set "$host" up
    ip -n "$ns" link set lo up
    shape "ip netns exec $ns" "$host" "$delay" "$rate"  # host -> bridge
    shape "" "$port" "$delay" "$rate"                   # bridge -> host
    echo "$ns $subnet.$((i + 1))"
  done
}

down() {
  local tag=$1 n=$2
  for i in $(seq 1 "$n"); do
    read -r ns _ _ _ <<<"$(names "$tag" "$i")"
    ip netns del "$ns" 2>/dev/null || true
  done
  read -r _ _ _ br <<<"$(names "$tag" 0)"
  ip link del "$br" 2>/dev/null || true
}

case "${1:-}" in
  up) up "$2" "$3" "${4:-none}" ;;
  down) down "$2" "$3" ;;
  profiles) profiles ;;
  *) sed -n '2,11p' "$0" >&2; exit 1 ;;
esac
