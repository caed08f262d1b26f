#!/usr/bin/env bash
# Licensed under the Apache License, Version 2.0; see LICENSE.
#
# Writes, to stdout, a patch for Apache httpd's own prefork MPM: a child
# with a single listener no longer puts it in a pollset.
#
#   contrib/upstream/prefork-one-listener.sh HTTPD_TREE > prefork-one-listener.patch
#   (cd HTTPD_TREE && patch -p1 < prefork-one-listener.patch)
#
# HTTPD_TREE is a pristine httpd source tree (trunk, or 2.4.x: the change
# is the same).  The patch is computed from the tree's own
# server/mpm/prefork/prefork.c, so this repository holds only the lines
# it adds; the script refuses a file whose lines it does not find exactly
# once (an already patched tree, or one changed since).
#
# Why (contrib/upstream/README.md has the report and the measurements):
# with one listener the child never polls, it blocks in accept(); but it
# still builds a pollset and adds the listener to it, and on Linux that
# is an epoll registration: an entry on the listening socket's wait
# queue, per child.  Every new connection walks the whole queue under its
# lock before it wakes the one child in accept().
set -euo pipefail

die() {
    printf 'prefork-one-listener.sh: %s\n' "$*" >&2
    exit 1
}

[ $# -eq 1 ] || die "usage: $0 HTTPD_TREE > prefork-one-listener.patch"
TREE=$1
FILE=server/mpm/prefork/prefork.c
[ -f "$TREE/$FILE" ] || die "$TREE has no $FILE: not an httpd source tree"

# Each line the edit keys on, and how many times it must occur.
ANCHORS=(
    '    apr_pollset_t *pollset;'
    '    /* Set up the pollfd array */'
    '        apr_pollfd_t *pfd = apr_pcalloc(pchild, sizeof *pfd);'
    '        lr->accept_func = ap_unixd_accept;'
)
for anchor in "${ANCHORS[@]}"; do
    count=$(grep -cxF -- "$anchor" "$TREE/$FILE" || true)
    [ "$count" -eq 1 ] \
        || die "$TREE/$FILE has '$anchor' $count times, not once: not a pristine prefork.c this patch knows (already patched?)"
done

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/a/${FILE%/*}" "$WORK/b/${FILE%/*}"
cp "$TREE/$FILE" "$WORK/a/$FILE"

# The edit:
# - the pollset starts NULL, and is created only for several listeners
#   (the creation and its error check indented into the condition);
# - each listener gets its accept function first; with no pollset the
#   loop goes on to the next one without adding it;
# - the old assignment at the loop's end goes, with the blank line
#   before it.
awk '
function flush_blank() {
    if (blank) {
        print ""
        blank = 0
    }
}
state == "create" {
    if ($0 == "    }") {
        print "        }"
        print "    }"
        state = ""
    }
    else if ($0 == "") {
        print ""
    }
    else {
        print "    " $0
    }
    next
}
$0 == "" {
    flush_blank()
    blank = 1
    next
}
$0 == "    apr_pollset_t *pollset;" {
    flush_blank()
    print "    apr_pollset_t *pollset = NULL;"
    next
}
$0 == "    /* Set up the pollfd array */" {
    flush_blank()
    print "    /* Set up the pollfd array, if there is more than one listener to"
    print "     * poll.  A child with a single listener never polls: it blocks in"
    print "     * accept() below.  The listener in its pollset would only be one"
    print "     * more entry on the listening socket'"'"'s wait queue (an epoll"
    print "     * registration), which every new connection walks, one entry per"
    print "     * child."
    print "     */"
    print "    if (num_listensocks > 1) {"
    state = "create"
    next
}
$0 == "        apr_pollfd_t *pfd = apr_pcalloc(pchild, sizeof *pfd);" {
    flush_blank()
    print "        apr_pollfd_t *pfd;"
    print ""
    print "        lr->accept_func = ap_unixd_accept;"
    print "        if (!pollset) {"
    print "            continue;"
    print "        }"
    print ""
    print "        pfd = apr_pcalloc(pchild, sizeof *pfd);"
    next
}
$0 == "        lr->accept_func = ap_unixd_accept;" {
    blank = 0
    next
}
{
    flush_blank()
    print
}
END {
    flush_blank()
}
' "$WORK/a/$FILE" > "$WORK/b/$FILE"

cd "$WORK"
status=0
diff -u --label "a/$FILE" --label "b/$FILE" "a/$FILE" "b/$FILE" || status=$?
[ "$status" -eq 1 ] || die "diff found no change (status $status)"
