"""sitedir.py PREFIX -- where `make install PREFIX=...` puts the Python
package fence (the Makefile's PYTHONDIR default), for the python3 that
runs this: the folder under PREFIX that this interpreter already searches
(sys.path) among its install schemes' purelib folders -- Debian's
/usr/lib/python3/dist-packages for /usr, /usr/local/lib/python3.X/
dist-packages for /usr/local -- and else the posix_prefix scheme's
PREFIX/lib/python3.X/site-packages (then PYTHONPATH must name it)."""
import sys
import sysconfig

prefix = sys.argv[1].rstrip('/') or '/'
vars_ = {'base': prefix, 'platbase': prefix, 'installed_base': prefix,
         'installed_platbase': prefix}
cands = []
# The schemes whose folders hang from the prefix itself (Debian's
# posix_local puts "local/" under it, and the user schemes are elsewhere).
for scheme in ('posix_prefix', 'deb_system', 'posix_home'):
    if scheme in sysconfig.get_scheme_names():
        p = sysconfig.get_path('purelib', scheme, vars_)
        cands += [p, p.replace('/site-packages', '/dist-packages')]
searched = [p for p in sys.path if p in cands]
print(searched[0] if searched else sysconfig.get_path('purelib', 'posix_prefix', vars_))
