#!/usr/bin/perl
# Runs pve-ha-manager 5.2.0's own rules and groups code (PVE::HA::Rules, ::Groups, ...) on the
# cases in tests/sim/ha/data/ and prints what upstream computes; generate.sh stores the output as
# the cases' expected results. The Python port is tested against these files, never against itself.
#
#   oracle.pl rules FILE.cfg       -> test_rules_config.pl's check_cfg report, then
#                                     "--- Warnings ---" and the parser's warnings
#   oracle.pl groups DIR           -> DIR/{groups,service_config[,rules_config]}: the Manager's
#                                     group migration (JSON of every stage, the written rules file)
#   oracle.pl accessors FILE.json  -> {rules, nodes, online, ss, sids}: get_node_affinity,
#                                     get_affinitive_resources, get_resource_affinity, is_allowed_on_node,
#                                     apply_negative/positive_resource_affinity per sid (JSON)
use strict;
use warnings;

use JSON;
use Storable qw(dclone);

use PVE::Tools;
use PVE::HA::Groups;
use PVE::HA::Rules;
use PVE::HA::Rules::NodeAffinity qw(get_node_affinity);
use PVE::HA::Rules::ResourceAffinity qw(get_affinitive_resources get_resource_affinity
    apply_positive_resource_affinity apply_negative_resource_affinity);

PVE::HA::Rules::NodeAffinity->register();
PVE::HA::Rules::ResourceAffinity->register();
PVE::HA::Rules->init(property_isolation => 1);

my @warnings;
$SIG{__WARN__} = sub { push @warnings, $_[0]; };

my $json = JSON->new->canonical->pretty->utf8;

my ($mode, $path) = @ARGV;
die "usage: $0 rules|groups|accessors PATH\n" if !$mode || !$path;

if ($mode eq 'rules') {
    my $raw = PVE::Tools::file_get_contents($path);
    my $nodes = ['node1', 'node2', 'node3'];
    my $name = $path;
    $name =~ s!.*/!!;
    my $cfg = PVE::HA::Rules->parse_config($name, $raw);
    PVE::HA::Rules->set_rule_defaults($_) for values %{ $cfg->{ids} };
    my $messages = PVE::HA::Rules->transform($cfg, $nodes);
    my $compiled_cfg = PVE::HA::Rules->compile($cfg, $nodes);
    print "--- Log ---\n";
    print $_ for @$messages;
    print "--- Config ---\n";
    print to_json($cfg, { canonical => 1, pretty => 1, utf8 => 1 });
    print "--- Compiled Config ---\n";
    print to_json($compiled_cfg, { canonical => 1, pretty => 1, utf8 => 1 });
    print "--- Warnings ---\n";
    print $_ for @warnings;
} elsif ($mode eq 'groups') {
    my $nodes = ['node1', 'node2', 'node3'];
    my $groups = PVE::HA::Groups->parse_config('groups', PVE::Tools::file_get_contents("$path/groups"));
    my $resources = decode_json(PVE::Tools::file_get_contents("$path/service_config"));
    my $rules_raw = -f "$path/rules_config" ? PVE::Tools::file_get_contents("$path/rules_config") : '';
    my $rules = PVE::HA::Rules->parse_config('rules_config', $rules_raw);
    PVE::HA::Rules->set_rule_defaults($_) for values %{ $rules->{ids} };
    my $result = { parsed_groups => dclone($groups) };
    # the order of Manager::manage: resources first, then (on a config change) rules
    PVE::HA::Groups::migrate_groups_to_resources($groups, $resources);
    PVE::HA::Groups::migrate_groups_to_rules($rules, $groups, $resources);
    $result->{groups} = $groups;
    $result->{resources} = $resources;
    $result->{rules} = dclone($rules);
    $result->{written} = eval { PVE::HA::Rules->write_config('rules_config', dclone($rules)) };
    $result->{write_error} = $@ if $@;
    $result->{messages} = PVE::HA::Rules->transform($rules, $nodes);
    $result->{compiled} = PVE::HA::Rules->compile($rules, $nodes);
    $result->{warnings} = \@warnings;
    print $json->encode($result);
} elsif ($mode eq 'accessors') {
    my $case = decode_json(PVE::Tools::file_get_contents($path));
    my $rules = PVE::HA::Rules->parse_config('rules_config', $case->{rules});
    PVE::HA::Rules->set_rule_defaults($_) for values %{ $rules->{ids} };
    my $messages = PVE::HA::Rules->transform($rules, $case->{nodes});
    my $compiled = PVE::HA::Rules->compile($rules, $case->{nodes});
    my ($node_affinity, $resource_affinity) = $compiled->@{qw(node-affinity resource-affinity)};
    my $ss = $case->{ss};
    my $result = { messages => $messages, sids => {} };
    for my $sid ($case->{sids}->@*) {
        my $online = { map { $_ => 1 } $case->{online}->@* };
        my ($allowed, $preferred) = get_node_affinity($node_affinity, $sid, $online);
        my $r = {
            allowed_nodes => dclone($allowed),
            preferred_nodes => dclone($preferred),
        };
        my ($positive, $negative) = get_affinitive_resources($resource_affinity, $sid);
        $r->{affinitive} = { together => dclone($positive), separate => dclone($negative) };
        my ($together, $separate) = get_resource_affinity($resource_affinity, $sid, $ss, $online);
        $r->{resource_affinity} = { together => dclone($together), separate => dclone($separate) };
        $r->{is_allowed_on_node} = {
            map {
                $_ => (PVE::HA::Rules::ResourceAffinity::is_allowed_on_node($together, $separate, $_) ? 1 : 0)
            } $case->{online}->@*
        };
        # what select_service_node does with them
        my $pri_nodes = dclone($preferred);
        apply_negative_resource_affinity($separate, $pri_nodes);
        $r->{after_negative} = dclone($pri_nodes);
        apply_positive_resource_affinity($together, $pri_nodes);
        $r->{after_positive} = $pri_nodes;
        $r->{together_after_positive} = $together;
        $result->{sids}->{$sid} = $r;
    }
    $result->{warnings} = \@warnings;
    print $json->encode($result);
} else {
    die "unknown mode '$mode'\n";
}
