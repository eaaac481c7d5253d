#!/bin/sh
# disk_cleaner - delete regular files older than N days under one directory.
#
# Wire protocol: args JSON object on stdin, one JSON object on stdout, log lines on stderr.
#   {"path": "/var/cache/build", "dry_run": true, "older_than_days": 7}
#   -> {"freed_bytes": 1048576, "files_deleted": 17, "dry_run": true, "older_than_days": 7,
#       "errors": 0}
#
# - dry_run defaults to true: nothing is deleted, the result tells what would be freed.
# - Only regular files whose last modification is older than older_than_days (default 7) are
#   considered; directories are kept. Symbolic links are never followed (a link is not a
#   regular file, a linked directory is not entered), other filesystems mounted below the path
#   are not entered (find -xdev), deletion goes through find's fd-relative unlink.
# - The path must be absolute, exist, be a directory and not a symbolic link itself; "/" and
#   system trees (/etc, /usr, /boot, /proc, /var/lib, ...) are refused.
# - freed_bytes is the sum of the apparent sizes of the files (what `ls -l` shows).
# - Files that cannot be deleted or directories that cannot be read are reported on stderr
#   and counted in "errors"; the rest of the tree is still processed.
#
# Exit status: 0 done (see "errors"), 2 invalid args, 1 any other failure. Needs only a POSIX
# shell, awk and GNU findutils (-printf, -delete, -newermt).

set -u
LC_ALL=C
export LC_ALL
CDPATH=

SKILL=disk_cleaner
MAX_DAYS=36500

fail() {
    status=$1
    shift
    printf '%s: %s\n' "$SKILL" "$*" >&2
    exit "$status"
}

# Printable form of a path for log lines (control characters shown as '?').
printable() { printf '%s' "$1" | tr '\001-\037\177' '?'; }

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

case $0 in
    */*) here=${0%/*} ;;
    *) here=. ;;
esac
command -v find >/dev/null 2>&1 || fail 1 "find is not available on PATH"

# --- arguments ---------------------------------------------------------------------------
parsed=$(head -c 1048576 | awk -f "$here/json_args.awk") || exit 2

have_path=false
path_enc=
dry_run=true
days=7
while read -r key type value; do
    [ -n "$key" ] || continue
    case $key in
        path)
            [ "$type" = s ] || fail 2 '"path" must be a string'
            path_enc=$value
            have_path=true
            ;;
        dry_run)
            [ "$type" = b ] || fail 2 '"dry_run" must be a boolean'
            dry_run=$value
            ;;
        older_than_days)
            days=$(int_arg older_than_days "$type" "$value" 0 "$MAX_DAYS") || exit 2
            ;;
        *) fail 2 "unknown argument \"$key\"" ;;
    esac
done <<EOF
$parsed
EOF
$have_path || fail 2 '"path" is required'

# Decode the path (the trailing "x" keeps trailing newlines through $(...)).
path=$(printf '%bx' "$path_enc")
path=${path%x}

# --- path checks ---------------------------------------------------------------------------
case $path in
    '') fail 2 'refusing an empty path' ;;
    /*) ;;
    *) fail 2 "refusing relative path \"$(printable "$path")\": the path must be absolute" ;;
esac
shown=$(printable "$path")
if [ -L "$path" ]; then
    fail 1 "refusing $shown: it is a symbolic link (give the real directory)"
fi
[ -e "$path" ] || fail 1 "refusing $shown: no such file or directory"
[ -d "$path" ] || fail 1 "refusing $shown: not a directory"
root=$(cd -P -- "$path" && pwd -P && printf x) || fail 1 "cannot enter $shown"
root=${root%?x}
shown=$(printable "$root")

case $root in
    /) fail 1 'refusing to clean "/"' ;;
    /bin | /bin/* | /boot | /boot/* | /dev | /dev/* | /etc | /etc/* | /lib | /lib/* | \
        /lib32 | /lib32/* | /lib64 | /lib64/* | /libx32 | /libx32/* | /proc | /proc/* | \
        /run | /run/* | /sbin | /sbin/* | /sys | /sys/* | /usr | /usr/* | \
        /var/lib | /var/lib/*)
        fail 1 "refusing $shown: system directory" ;;
    /home | /root | /var | /srv | /opt | /mnt | /media)
        fail 1 "refusing $shown: too broad, give a more specific directory" ;;
esac
if [ -n "${HOME:-}" ] && [ "$root" = "$HOME" ]; then
    fail 1 "refusing $shown: it is the home directory"
fi

# --- the work ------------------------------------------------------------------------------
now=$(date +%s) || fail 1 "cannot read the clock"
cutoff=$((now - days * 86400))

# A dry run also names the first SAMPLE files it would delete (what an approval's preview
# shows): control and non-ASCII bytes as '?', so that every name is one line of plain JSON.
SAMPLE=20
sample='[]'
if [ "$dry_run" = true ]; then
    sample=$(find "$root" -xdev -type f ! -newermt "@$cutoff" -printf '%p\0' 2>/dev/null |
        head -z -n "$SAMPLE" | tr '\001-\037\177-\377' '?' | tr '\0' '\n' | awk '
        { gsub(/\\/, "\\\\\\\\"); gsub(/"/, "\\\""); out = out (NR > 1 ? ", " : "") "\"" $0 "\"" }
        END { printf "[%s]", out }')
fi
if [ "$dry_run" = true ]; then
    mode='dry run, nothing is deleted'
    action=
else
    mode='deleting'
    action=-delete
fi
printf '%s: scanning %s for regular files older than %s days (%s)\n' \
    "$SKILL" "$shown" "$days" "$mode" >&2

# find prints "F <size>" for each file it selects (with -delete: only once deleted); its error
# messages are prefixed with "E " on the same stream, so the summing awk can count them
# without any file name ever being mistaken for a size line.
{
    # shellcheck disable=SC2086  # $action is empty or the single word -delete
    find "$root" -xdev -type f ! -newermt "@$cutoff" $action -printf 'F %s\n' \
        2>&1 1>&3 3>&- | sed 's/^/E /' 1>&3 3>&-
} 3>&1 | SAMPLE_JSON=$sample awk -v skill="$SKILL" -v dry="$dry_run" -v days="$days" '
    function progress(when) {
        printf "{\"progress\": %d, \"message\": \"%d files, %.0f bytes %s %s\"}\n", \
            files, files, bytes, (dry == "true" ? "would be freed" : "freed"), when \
            > "/dev/stderr"
    }
    /^F [0-9]+$/ {
        files++
        bytes += substr($0, 3)
        if (files % 1000 == 0) progress("so far")
        next
    }
    /^E / { errors++; printf "%s: %s\n", skill, substr($0, 3) > "/dev/stderr"; next }
    { printf "%s: %s\n", skill, $0 > "/dev/stderr" }
    END {
        progress("in total")
        printf "{\"freed_bytes\": %.0f, \"files_deleted\": %d, \"dry_run\": %s, " \
            "\"older_than_days\": %d, \"errors\": %d", bytes, files, dry, days, errors
        if (dry == "true") printf ", \"would_delete\": %s", ENVIRON["SAMPLE_JSON"]
        printf "}\n"
    }
'
