#!/usr/bin/env bash
# Regenerates the expected results of tests/sim/ha/data/ by running upstream's own Perl code
# (pve-ha-manager 5.2.0 and pve-common's SectionConfig/JSONSchema/ParseUtils) on every case.
#
#   bash tests/sim/ha/oracle/generate.sh [PVE_HA_MANAGER_GIT_DIR] [PVE_COMMON_GIT_DIR]
#
# The git dirs default to the workplace mirrors (bare repositories, read at HEAD). Needs perl with
# JSON (JSON::PP) and Digest::SHA; the few CPAN/PVE modules upstream's files load but these code
# paths never call (HTTP::Status, Net::IP, Devel::Cycle, ...) are replaced by stubs written below.
# Hash order is fixed (PERL_HASH_SEED=0); the cases avoid results that depend on it.
set -euo pipefail
HA_GIT="${1:-/work/.mirror/proxmox+pve-ha-manager/repo}"
COMMON_GIT="${2:-/work/.mirror/proxmox+pve-common/repo}"
HERE="$(cd "$(dirname "$0")" && pwd)"
DATA="$HERE/../data"
LIB="$(mktemp -d)"
trap 'rm -rf "$LIB"' EXIT

mkdir -p "$LIB/PVE/HA/Rules" "$LIB/Encode" "$LIB/Devel" "$LIB/HTTP" "$LIB/Net" "$LIB/URI"
for f in SectionConfig JSONSchema ParseUtils Exception; do
    git -C "$COMMON_GIT" show "HEAD:src/PVE/$f.pm" > "$LIB/PVE/$f.pm"
done
for f in Rules Groups HashTools Tools Usage Rules/NodeAffinity Rules/ResourceAffinity Rules/Helpers; do
    git -C "$HA_GIT" show "HEAD:src/PVE/HA/$f.pm" > "$LIB/PVE/HA/$f.pm"
done
# stubs: loaded by upstream's modules, not used by the code paths run here
cat > "$LIB/PVE/Tools.pm" <<'PERL'
package PVE::Tools; use strict; use warnings; use PVE::ParseUtils;
sub split_list { return PVE::ParseUtils::split_list(@_); }
sub encode_text { return PVE::ParseUtils::encode_text(@_); }
sub decode_text { return PVE::ParseUtils::decode_text(@_); }
sub file_get_contents { my ($fn) = @_; open(my $fh, '<', $fn) or die "open $fn: $!\n"; local $/; my $c = <$fh>; return $c // ''; }
1;
PERL
echo 'package PVE::ProcFSTools; 1;' > "$LIB/PVE/ProcFSTools.pm"
echo 'package PVE::Cluster; sub get_nodelist { return [] } 1;' > "$LIB/PVE/Cluster.pm"
echo 'package Encode::Locale; 1;' > "$LIB/Encode/Locale.pm"
cat > "$LIB/Devel/Cycle.pm" <<'PERL'
package Devel::Cycle; use base 'Exporter'; our @EXPORT = qw(find_cycle);
sub import { my $c = shift; __PACKAGE__->export_to_level(1, $c, @EXPORT); } sub find_cycle {} 1;
PERL
cat > "$LIB/HTTP/Status.pm" <<'PERL'
package HTTP::Status; use base 'Exporter';
use constant { HTTP_BAD_REQUEST => 400, HTTP_UNAUTHORIZED => 401, HTTP_FORBIDDEN => 403, HTTP_NOT_FOUND => 404, HTTP_INTERNAL_SERVER_ERROR => 500, HTTP_NOT_IMPLEMENTED => 501 };
our @EXPORT_OK = qw(HTTP_BAD_REQUEST HTTP_UNAUTHORIZED HTTP_FORBIDDEN HTTP_NOT_FOUND HTTP_INTERNAL_SERVER_ERROR HTTP_NOT_IMPLEMENTED); our %EXPORT_TAGS = (constants => \@EXPORT_OK); 1;
PERL
cat > "$LIB/Net/IP.pm" <<'PERL'
package Net::IP; use base 'Exporter'; our @EXPORT_OK = qw(ip_is_ipv4 ip_is_ipv6 ip_bintoip ip_iptobin ip_expand_address ip_get_version);
our %EXPORT_TAGS = (PROC => \@EXPORT_OK); sub ip_is_ipv4 {} sub ip_is_ipv6 {} sub ip_bintoip {} sub ip_iptobin {} sub ip_expand_address {} sub ip_get_version {} 1;
PERL
# URI::Escape's uri_escape/uri_unescape (used by encode_text/decode_text), as the CPAN module does
cat > "$LIB/URI/Escape.pm" <<'PERL'
package URI::Escape; use base 'Exporter'; our @EXPORT = qw(uri_escape uri_unescape);
sub uri_escape { my ($text, $unsafe) = @_; return undef if !defined $text; $text =~ s/([$unsafe])/sprintf("%%%02X", ord($1))/ge; return $text; }
sub uri_unescape { my $str = shift; $str =~ s/%([0-9A-Fa-f]{2})/chr(hex($1))/eg if defined $str; return $str; }
1;
PERL

export PERL_HASH_SEED=0 PERL_PERTURB_KEYS=0
run() { perl -I"$LIB" "$HERE/oracle.pl" "$@"; }
for f in "$DATA"/rules/*.cfg; do run rules "$f" > "$f.expect"; done
for d in "$DATA"/groups/*/; do run groups "$d" > "${d%/}/expect.json"; done
for f in "$DATA"/accessors/*.json; do
    case "$f" in *.expect.json) continue ;; esac
    run accessors "$f" > "${f%.json}.expect.json"
done
echo "regenerated the expected results under $DATA"
