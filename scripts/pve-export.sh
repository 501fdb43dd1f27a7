#!/usr/bin/env bash
# pve-export.sh — export what `pvegym import` / `pvegym whatif` need from a Proxmox VE cluster.
#
# Run on ONE node of the cluster, as root:
#
#     bash pve-export.sh [--out DIR] [--anonymize] [--tar] [--since EPOCH]
#
# Read-only: it only calls `pvesh get … --output-format json` (the cluster's own API, PVE 8 and 9)
# and writes DIR (default ./pvegym-export-<date>), or DIR.tar.gz with --tar. What it writes
# (layout in pvegym's tests/data/pve-exports/README.md):
#
#   /cluster/resources, /cluster/options (crs, migration type, bwlimit only), /cluster/ha/resources,
#   /cluster/ha/rules (PVE 9) or /cluster/ha/groups (PVE 8), /cluster/ha/status/manager_status,
#   /cluster/mapping/pci; for every node its status, the installed versions of pve-manager,
#   pve-cluster, libpve-cluster-perl and pve-ha-manager (/nodes/NODE/apt/versions: they decide
#   the units of the crs options), its migration tasks since EPOCH (default: 9 days ago, what the
#   week series span) and its RRD series (hour/day/week, AVERAGE and MAX); for every guest its
#   config and RRD series.
#
# Never exported, with or without --anonymize: descriptions and notes, comments, passwords,
# SSH keys, cloud-init settings (ipconfig, nameserver, …), network devices (MAC addresses,
# bridges), IP addresses and networks, tags, SMBIOS/UUIDs, hook scripts, user names. Every API
# answer goes through an allow-list: only the fields pvegym reads are written.
#
# --anonymize maps node, guest, storage, pool, HA group/rule and device-mapping names and guest
# IDs to neutral ones (node1, 100, storage1, …), consistently across all files.
#
# Requirements on the node: bash, perl with JSON::PP (both part of every PVE installation), gzip,
# tar. The environment variable PVESH overrides the pvesh command (for tests).
set -euo pipefail

usage() { sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; }

OUT=""
SINCE=""
ANON=0
TAR=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT="${2:?--out needs a directory}"; shift 2 ;;
    --anonymize) ANON=1; shift ;;
    --tar) TAR=1; shift ;;
    --since) SINCE="${2:?--since needs a unix time}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "pve-export.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
  esac
done

PVESH="${PVESH:-pvesh}"
if [ "$(id -u)" -ne 0 ] && [ "${PVE_EXPORT_ALLOW_NON_ROOT:-0}" != 1 ]; then
  echo "pve-export.sh: run as root on a cluster node (pvesh needs root's API access)" >&2
  exit 2
fi
command -v perl >/dev/null || { echo "pve-export.sh: perl is required" >&2; exit 2; }
perl -MJSON::PP -e 1 2>/dev/null || { echo "pve-export.sh: perl's JSON::PP is required" >&2; exit 2; }
[ -n "$OUT" ] || OUT="pvegym-export-$(date -u +%Y%m%d-%H%M%S)"
if [ -e "$OUT" ]; then echo "pve-export.sh: $OUT exists; choose another --out" >&2; exit 2; fi

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/raw" "$OUT"
NOW="$(date +%s)"
[ -n "$SINCE" ] || SINCE=$((NOW - 9 * 86400)) # the week series reach 8.75 days back on PVE 8
case "$SINCE" in *[!0-9]*) echo "pve-export.sh: --since needs a unix time" >&2; exit 2 ;; esac
: >"$TMP/missing"

# ------------------------------------------------------------------------------ the filter
# One Perl program: the allow-list of every answer (kind = what the answer is), the anonymization
# map, and a few helpers. Reads JSON on stdin, writes JSON on stdout.
cat >"$TMP/filter.pl" <<'PERL'
use strict;
use warnings;
use JSON::PP;

# the XS decoder PVE itself uses when it is there (it is on every PVE node): ~20× faster than
# JSON::PP on a week of RRD rows
my $JSON = eval { require Cpanel::JSON::XS; 'Cpanel::JSON::XS' } || eval { require JSON::XS; 'JSON::XS' } || 'JSON::PP';
my $json = $JSON->new->canonical(1)->allow_nonref(1);
my ($mode, @args) = @ARGV;
my $map = {};
if ($ENV{PVE_EXPORT_MAP} && -s $ENV{PVE_EXPORT_MAP}) {
    local $/;
    open(my $fh, '<', $ENV{PVE_EXPORT_MAP}) or die "map: $!\n";
    $map = $json->decode(<$fh>);
}
my $anon = %$map ? 1 : 0;

sub slurp { my ($f) = @_; local $/; open(my $fh, '<', $f) or die "$f: $!\n"; my $d = <$fh>; return $d; }
sub read_json { my ($f) = @_; my $t = slurp($f); $t =~ s/^\s+|\s+$//g; return $t eq '' ? undef : $json->decode($t); }

# names the map does not know (a node that left the cluster) never pass through unanonymized
sub m_node { my ($n) = @_; return $n if !$anon || !defined $n; return $map->{node}{$n} // 'node-other'; }
sub m_vmid { my ($v) = @_; return $v if !$anon || !defined $v; return $map->{vmid}{$v} // 0; }
sub m_name { my ($kind, $n) = @_; return $n if !$anon; return $map->{$kind}{$n} // "$kind-unknown"; }
sub m_sid {
    my ($s) = @_;
    return $s if !$anon;
    return $s =~ /^(vm|ct):(\d+)$/ ? "$1:" . m_vmid($2) : $s;
}
sub m_sids { my ($l) = @_; return join(',', map { m_sid($_) } split(/\s*,\s*/, $l // '')); }
sub m_nodelist {
    my ($l) = @_;
    return join(',', map { my ($n, $p) = split(/:/, $_, 2); m_node($n) . (defined $p ? ":$p" : '') }
        grep { length } split(/\s*,\s*/, $l // ''));
}
sub keep { my ($h, @k) = @_; return { map { exists $h->{$_} ? ($_ => $h->{$_}) : () } @k }; }
sub strip_ip { my ($t) = @_; $t //= ''; $t =~ s/\b\d{1,3}(?:\.\d{1,3}){3}(?:\/\d+)?\b/<ip>/g; $t =~ s/\b[0-9a-f]{0,4}(?::[0-9a-f]{0,4}){2,7}\b/<ip>/gi; return $t; }

# a volume id: storage:volname, a path, or a keyword (none, cdrom)
my %volmap;
sub m_volume {
    my ($v) = @_;
    return $v if !$anon || $v eq '' || $v eq 'none' || $v eq 'cdrom';
    if ($v =~ m{^/}) { $volmap{$v} //= ($v =~ m{^/dev/} ? '/dev/device' : '/path') . (scalar(keys %volmap) + 1); return $volmap{$v}; }
    my ($st, $vol) = split(/:/, $v, 2);
    return m_name('storage', $v) if !defined $vol;
    my $s = m_name('storage', $st);
    if ($vol =~ m{^(?:(\d+)/)?(vm|base|subvol)-(\d+)-(disk-\d+|cloudinit|state-[\w-]+)((?:\.\w+)?)$}) {
        return "$s:" . (defined $1 ? m_vmid($1) . '/' : '') . "$2-" . m_vmid($3) . "-$4$5";
    }
    $volmap{$v} //= ($vol =~ m{^iso/} ? 'iso/image' : 'volume') . (scalar(keys %volmap) + 1) . ($vol =~ m{^iso/} ? '.iso' : '');
    return "$s:$volmap{$v}";
}
# a drive or mount point: keep the volume and the options pvegym reads
sub m_drive {
    my ($val) = @_;
    my @items = split(/,/, $val // '');
    my ($vol, %o) = ('');
    for my $it (@items) {
        my ($k, $v) = split(/=/, $it, 2);
        if (!defined $v) { $vol = $k if $vol eq ''; next; }
        if ($k eq 'file' || $k eq 'volume') { $vol = $v; next; }
        $o{$k} = $v if $k =~ /^(media|size|shared)$/;
    }
    return join(',', m_volume($vol), map { "$_=$o{$_}" } sort keys %o);
}
sub m_device {
    my ($key, $val) = @_;
    return $val if $val eq 'socket' || $val eq 'spice';
    my @out;
    for my $it (split(/,/, $val)) {
        my ($k, $v) = split(/=/, $it, 2);
        if (!defined $v) { push @out, $anon ? "device" : $k; next; }
        if ($k eq 'mapping') { push @out, "mapping=" . m_name('mapping', $v); next; }
        if ($k eq 'host') { push @out, "host=" . ($v =~ /^spice$/i ? $v : $anon ? 'device' : $v); next; }
        push @out, "$k=$v" if $k =~ /^(pcie|x-vga|mdev|rombar)$/;
    }
    return join(',', @out);
}

my %VM_KEYS = map { $_ => 1 } qw(cores sockets vcpus cpulimit cpuunits cpu memory balloon shares numa
    hugepages keephugepages affinity machine ostype lock template migrate_speed migrate_downtime vga
    ivshmem hostpci hostusb amd-sev intel-tdx arch swap unprivileged);

sub config {
    my ($c) = @_;
    my $out = {};
    for my $k (sort keys %$c) {
        my $v = $c->{$k};
        next if ref $v;
        if ($k =~ /^(ide|sata|scsi|virtio|efidisk|tpmstate|unused|rootfs|mp)\d*$/) { $out->{$k} = m_drive($v); }
        elsif ($k =~ /^(hostpci|usb|serial|parallel|virtiofs|dev)\d+$/) { $out->{$k} = m_device($k, $v); }
        elsif ($k eq 'vga') { my @o = grep { /^(clipboard=|std|qxl|virtio|none|serial|cirrus|vmware)/ } split(/,/, $v); $out->{$k} = join(',', @o); }
        elsif ($VM_KEYS{$k}) { $out->{$k} = $v; }
    }
    return $out;
}

sub resources {
    my ($list) = @_;
    my @out;
    for my $r (@$list) {
        my $t = $r->{type} // '';
        if ($t eq 'node') {
            my $e = keep($r, qw(type status maxcpu maxmem cpu mem uptime));
            $e->{node} = m_node($r->{node}); $e->{id} = "node/$e->{node}";
            push @out, $e;
        } elsif ($t eq 'qemu' || $t eq 'lxc') {
            my $e = keep($r, qw(type status maxcpu maxmem cpu mem memhost maxdisk disk template hastate lock uptime));
            $e->{vmid} = m_vmid($r->{vmid}) + 0; $e->{node} = m_node($r->{node});
            $e->{name} = $anon ? "guest$e->{vmid}" : $r->{name} if defined $r->{name};
            $e->{id} = "$t/$e->{vmid}";
            push @out, $e;
        } elsif ($t eq 'storage') {
            my $e = keep($r, qw(type shared plugintype status content));
            $e->{storage} = m_name('storage', $r->{storage}); $e->{node} = m_node($r->{node});
            $e->{id} = "storage/$e->{node}/$e->{storage}";
            push @out, $e;
        }
    }
    return [sort { $a->{id} cmp $b->{id} } @out];
}

sub manager_status {
    my ($d) = @_;
    my $ms = $d->{manager_status} // {};
    my $out = {};
    if (%$ms) {
        my $m = keep($ms, qw(timestamp));
        $m->{master_node} = m_node($ms->{master_node}) if defined $ms->{master_node};
        $m->{node_status} = { map { m_node($_) => $ms->{node_status}{$_} } keys %{ $ms->{node_status} // {} } };
        my $ss = $ms->{service_status} // {};
        $m->{service_status} = { map {
            my $s = $ss->{$_};
            my $e = keep($s, qw(state running uid));
            $e->{node} = m_node($s->{node}) if defined $s->{node};
            $e->{target} = m_node($s->{target}) if defined $s->{target};
            $e->{failed_nodes} = [map { m_node($_) } @{ $s->{failed_nodes} }] if ref $s->{failed_nodes} eq 'ARRAY';
            (m_sid($_) => $e) } keys %$ss };
        $out->{manager_status} = $m;
    }
    my $lrm = $d->{lrm_status} // {};
    $out->{lrm_status} = { map {
        my $l = $lrm->{$_} // {};
        my $e = keep($l, qw(mode state timestamp));
        my $res = $l->{results} // {};
        $e->{results} = { map { my $x = $res->{$_}; ($_ => { %{ keep($x, qw(exit_code state)) }, sid => m_sid($x->{sid}) }) } keys %$res };
        (m_node($_) => $e) } keys %$lrm };
    $out->{quorum} = { node => m_node($d->{quorum}{node}), quorate => $d->{quorum}{quorate} } if ref $d->{quorum} eq 'HASH';
    return $out;
}

my %out;
if ($mode eq 'mkmap') {   # build the anonymization map from the raw answers
    my ($res, $ha, $rules, $groups, $pci) = map { -s $_ ? read_json($_) : undef } @args;
    # new names never equal an original one of the same kind (no false "leaks", no mix-ups)
    my $fresh = sub {
        my ($prefix, $start, @orig) = @_;
        my %taken = map { $_ => 1 } @orig;
        my ($i, %m) = ($start);
        for my $o (@orig) { $i++ while $taken{"$prefix$i"}; $m{$o} = "$prefix$i"; $i++; }
        return \%m;
    };
    my @nodes = sort map { $_->{node} } grep { ($_->{type} // '') eq 'node' } @$res;
    my @ids = sort { $a <=> $b } map { $_->{vmid} } grep { ($_->{type} // '') =~ /^(qemu|lxc)$/ } @$res;
    my %st = map { $_->{storage} => 1 } grep { ($_->{type} // '') eq 'storage' } @$res;
    my $vmid = $fresh->('', 100, @ids);
    $_ += 0 for values %$vmid;
    print $json->encode({
        node => $fresh->('node', 1, @nodes),
        vmid => $vmid,
        storage => $fresh->('storage', 1, sort keys %st),
        group => $fresh->('group', 1, sort map { $_->{group} } @{ $groups // [] }),
        rule => $fresh->('rule', 1, sort map { $_->{rule} } @{ $rules // [] }),
        mapping => $fresh->('pci', 1, sort map { $_->{id} } @{ $pci // [] }),
    });
    exit 0;
}
if ($mode eq 'guests') {  # lines "node kind vmid template" of the raw resources
    my $res = read_json($args[0]);
    for my $r (sort { $a->{vmid} <=> $b->{vmid} } grep { ($_->{type} // '') =~ /^(qemu|lxc)$/ } @$res) {
        print join(' ', $r->{node}, $r->{type}, $r->{vmid}, $r->{template} ? 1 : 0), "\n";
    }
    exit 0;
}
if ($mode eq 'nodes') {
    my $res = read_json($args[0]);
    print "$_->{node} " . ($_->{status} // 'unknown') . "\n" for sort { $a->{node} cmp $b->{node} } grep { ($_->{type} // '') eq 'node' } @$res;
    exit 0;
}
if ($mode eq 'map-node') { print m_node($args[0]), "\n"; exit 0; }
if ($mode eq 'map-vmid') { print m_vmid($args[0]), "\n"; exit 0; }
if ($mode eq 'tasks') {
    my @t;
    for my $f (@args) {
        my $l = -s $f ? read_json($f) : [];
        for my $x (@$l) {
            next if ($x->{type} // '') !~ /^(qmigrate|vzmigrate|hamigrate)$/;
            my $e = keep($x, qw(type starttime endtime));
            $e->{node} = m_node($x->{node});
            my $id = $x->{id} // '';   # a vmid (qemu-server's and pve-container's hamigrate too)
            $e->{id} = $id =~ /^(vm|ct):\d+$/ ? m_sid($id) : m_vmid($id) . '';
            $e->{status} = !defined $x->{status} ? undef : $x->{status} eq 'OK' ? 'OK' : 'error';
            push @t, $e;
        }
    }
    print $json->pretty->encode([sort { $b->{starttime} <=> $a->{starttime} } @t]);
    exit 0;
}
if ($mode eq 'meta') {    # export.json
    my ($created, $on, $anonymized, $since, $missing) = @args;
    my @m;
    if (-s $missing) { open(my $fh, '<', $missing) or die; while (<$fh>) { chomp; my ($p, $e) = split(/\t/, $_, 2); push @m, { path => $p, error => strip_ip($e) }; } }
    print $json->pretty->encode({ format => 'pvegym-pve-export/1', script_version => '1', created => $created + 0,
        exported_on => m_node($on), anonymized => $anonymized ? \1 : \0,
        timeframes => [qw(hour day week)], cfs => [qw(AVERAGE MAX)], since => $since + 0, missing => \@m });
    exit 0;
}
if ($mode eq 'error') { my $t = strip_ip($args[0]); $t =~ s/\b\Q$_\E\b/m_node($_)/ge for keys %{ $map->{node} // {} }; print "$t\n"; exit 0; }

my $in = do { local $/; <STDIN> };
if ($mode eq 'rrd') {
    # RRD rows are flat objects of numbers: keep exactly the "key":number pairs (an allow-list
    # that needs no JSON decoder — a week of 1-minute rows takes JSON::PP about a second)
    my @rows;
    while ($in =~ /\{([^{}]*)\}/g) {
        my $body = $1;
        my @pairs;
        while ($body =~ /"([a-z0-9_]+)"\s*:\s*(-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)(?=\s*(?:,|$))/g) {
            push @pairs, "\"$1\":$2";
        }
        push @rows, '{' . join(',', sort @pairs) . '}' if @pairs;
    }
    print '[', join(',', @rows), "]\n";
    exit 0;
}
my $d = $json->decode($in);
my $r;
if ($mode eq 'version') { $r = keep($d, qw(version release repoid)); }
elsif ($mode eq 'resources') { $r = resources($d); }
elsif ($mode eq 'options') {
    $r = keep($d, qw(crs ha bwlimit max_workers));
    $r->{migration} = { type => $d->{migration}{type} } if ref $d->{migration} eq 'HASH' && defined $d->{migration}{type};
}
elsif ($mode eq 'ha-resources') {
    $r = [map { my $e = keep($_, qw(type state failback max_restart max_relocate auto-rebalance errors));
                $e->{sid} = m_sid($_->{sid}); $e->{group} = m_name('group', $_->{group}) if defined $_->{group}; $e } @$d];
}
elsif ($mode eq 'ha-rules') {
    $r = [map { my $e = keep($_, qw(type strict affinity disable order errors));
                $e->{rule} = m_name('rule', $_->{rule}); $e->{resources} = m_sids($_->{resources});
                $e->{nodes} = m_nodelist($_->{nodes}) if defined $_->{nodes}; $e } @$d];
}
elsif ($mode eq 'ha-groups') {
    $r = [map { my $e = keep($_, qw(type restricted nofailback));
                $e->{group} = m_name('group', $_->{group}); $e->{nodes} = m_nodelist($_->{nodes}); $e } @$d];
}
elsif ($mode eq 'manager-status') { $r = manager_status($d); }
elsif ($mode eq 'pci') {
    $r = [map { { id => m_name('mapping', $_->{id}), 'live-migration-capable' => $_->{'live-migration-capable'} // 0 } } @$d];
}
elsif ($mode eq 'node-status') {
    $r = keep($d, qw(cpu wait uptime loadavg pveversion kversion));
    $r->{cpuinfo} = keep($d->{cpuinfo} // {}, qw(cpus cores sockets model mhz));
    $r->{memory} = keep($d->{memory} // {}, qw(total used free available));
    $r->{swap} = keep($d->{swap} // {}, qw(total used free)) if $d->{swap};
    $r->{ksm} = keep($d->{ksm} // {}, qw(shared)) if $d->{ksm};
}
elsif ($mode eq 'versions') {  # the packages that decide how datacenter.cfg's crs is read
    my %want = map { $_ => 1 } qw(pve-manager pve-cluster libpve-cluster-perl pve-ha-manager);
    $r = [map { keep($_, qw(Package Version OldVersion CurrentState)) } grep { $want{$_->{Package} // ''} } @$d];
}
elsif ($mode eq 'config') { $r = config($d); }
else { die "filter: unknown mode $mode\n"; }
print $json->pretty->encode($r);
PERL

filter() { perl "$TMP/filter.pl" "$@"; }

# get PATH FILE — pvesh answer into FILE; a failure is recorded in export.json, not fatal
get() {
  local path="$1" file="$2"; shift 2
  # stdin from /dev/null: the loops below feed their own input on stdin
  if "$PVESH" get "$path" --output-format json "$@" <"/dev/null" >"$file" 2>"$TMP/err"; then
    return 0
  fi
  local msg
  msg="$(head -n 1 "$TMP/err" | tr '\t' ' ')"
  printf '%s\t%s\n' "$path" "$(filter error "${msg:-failed}")" >>"$TMP/missing"
  rm -f "$file"
  return 1
}

# write KIND RAW OUT — the allow-listed (and anonymized) answer
write() {
  local kind="$1" raw="$2" out="$3"
  mkdir -p "$(dirname "$out")"
  if [ "$kind" = rrd ]; then
    filter rrd <"$raw" | gzip -9n >"$out.gz"
  else
    filter "$kind" <"$raw" >"$out"
  fi
}

echo "pve-export.sh: reading the cluster's configuration …" >&2
R="$TMP/raw"
get /version "$R/version" || { echo "pve-export.sh: pvesh does not answer (see $OUT/export.json)" >&2; }
get /cluster/resources "$R/resources" || { echo "pve-export.sh: cannot read /cluster/resources" >&2; exit 1; }
get /cluster/options "$R/options" || true
get /cluster/ha/resources "$R/ha-resources" || true
get /cluster/ha/rules "$R/ha-rules" || true
get /cluster/ha/groups "$R/ha-groups" || true
get /cluster/ha/status/manager_status "$R/manager-status" || true
get /cluster/mapping/pci "$R/pci" || true

export PVE_EXPORT_MAP=""
if [ "$ANON" = 1 ]; then
  filter mkmap "$R/resources" "$R/ha-resources" "$R/ha-rules" "$R/ha-groups" "$R/pci" >"$TMP/map.json"
  export PVE_EXPORT_MAP="$TMP/map.json"
fi

[ -s "$R/version" ] && write version "$R/version" "$OUT/version.json"
write resources "$R/resources" "$OUT/cluster/resources.json"
[ -s "$R/options" ] && write options "$R/options" "$OUT/cluster/options.json"
[ -s "$R/ha-resources" ] && write ha-resources "$R/ha-resources" "$OUT/cluster/ha/resources.json"
[ -s "$R/ha-rules" ] && write ha-rules "$R/ha-rules" "$OUT/cluster/ha/rules.json"
[ -s "$R/ha-groups" ] && write ha-groups "$R/ha-groups" "$OUT/cluster/ha/groups.json"
[ -s "$R/manager-status" ] && write manager-status "$R/manager-status" "$OUT/cluster/ha/manager_status.json"
[ -s "$R/pci" ] && write pci "$R/pci" "$OUT/cluster/mapping/pci.json"

series() { # series API-PATH OUT-DIR
  local api="$1" dir="$2" tf cf
  for tf in hour day week; do
    for cf in AVERAGE MAX; do
      if get "$api/rrddata" "$R/rrd" --timeframe "$tf" --cf "$cf"; then
        write rrd "$R/rrd" "$dir/rrddata-$tf-$cf.json"
      fi
    done
  done
}

while read -r node status; do
  n="$(filter map-node "$node")"
  echo "pve-export.sh: node $n ($status) …" >&2
  get "/nodes/$node/status" "$R/status" && write node-status "$R/status" "$OUT/nodes/$n/status.json"
  get "/nodes/$node/apt/versions" "$R/versions" && write versions "$R/versions" "$OUT/nodes/$n/versions.json"
  for type in qmigrate vzmigrate hamigrate; do
    get "/nodes/$node/tasks" "$R/tasks-$type" --typefilter "$type" --since "$SINCE" --limit 100000 || true
  done
  mkdir -p "$OUT/nodes/$n"
  filter tasks "$R/tasks-qmigrate" "$R/tasks-vzmigrate" "$R/tasks-hamigrate" >"$OUT/nodes/$n/tasks.json"
  rm -f "$R"/tasks-*
  series "/nodes/$node" "$OUT/nodes/$n"
done < <(filter nodes "$R/resources")

while read -r node kind vmid template; do
  [ "$template" = 1 ] && continue
  n="$(filter map-node "$node")"
  v="$(filter map-vmid "$vmid")"
  get "/nodes/$node/$kind/$vmid/config" "$R/config" && write config "$R/config" "$OUT/nodes/$n/$kind/$v/config.json"
  series "/nodes/$node/$kind/$vmid" "$OUT/nodes/$n/$kind/$v"
done < <(filter guests "$R/resources")

filter meta "$NOW" "$(hostname -s 2>/dev/null || hostname)" "$ANON" "$SINCE" "$TMP/missing" >"$OUT/export.json"

if [ "$TAR" = 1 ]; then
  tar -czf "$OUT.tar.gz" -C "$(dirname "$OUT")" "$(basename "$OUT")"
  rm -rf "$OUT"
  echo "pve-export.sh: wrote $OUT.tar.gz" >&2
else
  echo "pve-export.sh: wrote $OUT/" >&2
fi
