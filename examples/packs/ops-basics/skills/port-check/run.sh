#!/bin/sh
# port_check - does a TCP port on a host accept connections within a timeout?
#
# Wire protocol: args JSON object on stdin, one JSON object on stdout, log lines on stderr.
#   {"host": "db1.internal", "port": 5432, "timeout_ms": 2000}
#   -> {"host": "db1.internal", "port": 5432, "open": true, "elapsed_ms": 3,
#       "reason": "connected", "timeout_ms": 2000}
#
# "reason" says why: connected | refused (nothing listens) | timeout (no answer, e.g. a
# firewall dropping packets) | dns (the name does not resolve) | unreachable (any other
# network error). A closed or unreachable port is a normal result (exit 0, "open": false);
# only bad args (exit 2) or a host without the needed tools (exit 1) fail the call.
#
# The connection is opened by bash's /dev/tcp (or by nc when bash is missing) under
# coreutils' timeout, and closed at once: nothing is sent to the service.
# The host is passed as an argument, never interpolated into a command line.

set -u
LC_ALL=C
export LC_ALL

SKILL=port_check
DEFAULT_TIMEOUT_MS=2000
MAX_TIMEOUT_MS=60000

fail() {
    status=$1
    shift
    printf '%s: %s\n' "$SKILL" "$*" >&2
    exit "$status"
}

# int_arg NAME TYPE VALUE MIN MAX: print VALUE as a plain integer within [MIN, MAX].
int_arg() {
    [ "$2" = n ] || fail 2 "\"$1\" must be an integer"
    v=$3
    case $v in
        *[eE]*) fail 2 "\"$1\" must be an integer" ;;
        *.*)
            case ${v#*.} in *[!0]*) fail 2 "\"$1\" must be an integer" ;; esac
            v=${v%%.*}
            ;;
    esac
    digits=${v#-}
    [ "${#digits}" -le 9 ] || fail 2 "\"$1\" must be between $4 and $5"
    [ "$v" -ge "$4" ] && [ "$v" -le "$5" ] || fail 2 "\"$1\" must be between $4 and $5"
    printf '%d' "$v"
}

# Milliseconds since the epoch (GNU date; whole seconds elsewhere).
now_ms() {
    t=$(date +%s%N)
    case $t in
        *N | '') t=$(date +%s) && printf '%s000' "$t" ;;
        *) printf '%s' "${t%??????}" ;;
    esac
}

case $0 in
    */*) here=${0%/*} ;;
    *) here=. ;;
esac

# --- arguments ---------------------------------------------------------------------------
parsed=$(head -c 65536 | awk -f "$here/json_args.awk") || exit 2

host=
have_host=false
port=
timeout_ms=$DEFAULT_TIMEOUT_MS
while read -r key type value; do
    [ -n "$key" ] || continue
    case $key in
        host)
            [ "$type" = s ] || fail 2 '"host" must be a string'
            # Valid host names and IP literals only need [A-Za-z0-9._:-], which the decoder
            # leaves as they are: any other character ends up escaped and is refused below.
            host=$value
            have_host=true
            ;;
        port) port=$(int_arg port "$type" "$value" 1 65535) || exit 2 ;;
        timeout_ms)
            timeout_ms=$(int_arg timeout_ms "$type" "$value" 1 "$MAX_TIMEOUT_MS") || exit 2
            ;;
        *) fail 2 "unknown argument \"$key\"" ;;
    esac
done <<EOF
$parsed
EOF
$have_host || fail 2 '"host" is required'
[ -n "$port" ] || fail 2 '"port" is required'
case $host in
    '') fail 2 '"host" must not be empty' ;;
    -*) fail 2 '"host" must not start with "-"' ;;
    *[!A-Za-z0-9._:-]*) fail 2 '"host" must be a host name or an IP address ([A-Za-z0-9._:-])' ;;
esac
[ "${#host}" -le 253 ] || fail 2 '"host" is longer than 253 characters'

command -v timeout >/dev/null 2>&1 || fail 1 "timeout (coreutils) is not available on PATH"
secs=$((timeout_ms / 1000)).$(printf '%03d' $((timeout_ms % 1000)))

# --- the probe -----------------------------------------------------------------------------
printf '%s: connecting to %s port %s (timeout %s ms)\n' "$SKILL" "$host" "$port" "$timeout_ms" >&2
start=$(now_ms)
if command -v bash >/dev/null 2>&1; then
    # shellcheck disable=SC2016  # $1 and $2 are expanded by the child bash, on purpose
    message=$(timeout -k 1 "$secs" bash --noprofile --norc -c \
        'exec 3<>"/dev/tcp/$1/$2"' probe "$host" "$port" 2>&1)
    status=$?
elif command -v nc >/dev/null 2>&1; then
    message=$(timeout -k 1 "$secs" nc -z -w $((timeout_ms / 1000 + 1)) "$host" "$port" 2>&1)
    status=$?
else
    fail 1 "neither bash nor nc is available on PATH"
fi
end=$(now_ms)
elapsed=$((end - start))
[ "$elapsed" -ge 0 ] || elapsed=0

case $status in
    0) open=true reason=connected ;;
    124 | 137) open=false reason=timeout ;;
    125 | 126 | 127) fail 1 "could not run the probe: $message" ;;
    *)
        open=false
        case $message in
            *[Rr]efused*) reason=refused ;;
            *"not known"* | *"name resolution"* | *"No address"* | *"nodename nor servname"* | \
                *"ould not resolve"* | *"Unknown host"* | *"getaddrinfo"*) reason=dns ;;
            *) reason=unreachable ;;
        esac
        ;;
esac
if [ -n "$message" ]; then
    printf '%s\n' "$message" | sed "s/^/$SKILL: /" >&2
fi
printf '%s: %s port %s: %s after %s ms\n' "$SKILL" "$host" "$port" "$reason" "$elapsed" >&2
printf '{"host": "%s", "port": %s, "open": %s, "elapsed_ms": %s, "reason": "%s", "timeout_ms": %s}\n' \
    "$host" "$port" "$open" "$elapsed" "$reason" "$timeout_ms"
