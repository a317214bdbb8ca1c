# The RIPTIDE suite: the server logs a warning at start-up because the plugin is declared
# GAMMA (Debian's server is STABLE); that line is expected, not a test failure.
package My::Suite::Riptide;
@ISA = qw(My::Suite);
push @::global_suppressions, qr/Plugin 'RIPTIDE' is of maturity level gamma while the server is stable/;
bless { };
