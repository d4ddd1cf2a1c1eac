"""_bind.py -- what fence.pg and fence.sqlite share: reading the token and
holder a write must carry, and turning a refused write, once a store's C
classifier has named it, into fence.Stale / fence.NoToken raised from the
driver's own exception."""
import ctypes

from . import _lib
from ._errors import Error, ESTATE, STALE, ENOTOKEN, NoToken, stale_from


def token_of(what, lease):
    """(token, holder or None) of a fence.Lease, or of anything with an
    int .token and a str (or None) .holder."""
    token = getattr(lease, 'token', None)
    holder = getattr(lease, 'holder', None)
    if isinstance(token, bool) or not isinstance(token, int):
        raise TypeError('%s: lease must have an int token (a fence.Lease), not %s'
                        % (what, type(lease).__name__))
    if not 1 <= token <= _lib.FENCE_TOKEN_MAX:
        raise NoToken(ENOTOKEN, '%s: token %d is not a fencing token (1..2^63-1)' % (what, token),
                      'FENCE_ENOTOKEN')
    if holder is not None and not isinstance(holder, str):
        raise TypeError('%s: the holder must be a str or None, not %s'
                        % (what, type(holder).__name__))
    return token, holder or None


def not_in_transaction(what, hint):
    return Error(ESTATE, '%s: no transaction is open: a token binds to the writing '
                 'transaction, so set it inside one (%s)' % (what, hint), 'FENCE_ESTATE')


def classified(lib, status, info, message):
    """The fence exception for a classifier's answer, or None when the
    error is not a refusal (FENCE_EDB, FENCE_OK)."""
    if status in (STALE, ENOTOKEN):
        return stale_from(lib, status, info, message)
    return None


class Refusals:
    """A context manager: a driver exception that its store's classifier
    (refused(exc) -> fence.Stale or None) calls a refusal is raised again
    as that fence.Stale / fence.NoToken, from the driver's exception; any
    other passes unchanged."""

    def __init__(self, refused):
        self._refused = refused

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is None:
            return False
        err = self._refused(exc)
        if err is None:
            return False
        raise err from exc


StaleInfo = _lib.StaleInfo
byref = ctypes.byref
