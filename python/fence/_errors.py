"""_errors.py -- the exceptions: one base class, fence.Error, that carries
the C status (its number and name, from fence_common.h) and the message of
the failed call (fence_client_errmsg and its kin), and a subclass for each
outcome a caller acts on.  Status numbers are only ever appended in C,
never renumbered, so the few the package names are constants here
(tests/python checks them against fence_common.h)."""

OK, EINVAL, ESTATE, BUSY, TIMEOUT, LOST, STALE, EDB, ENOTOKEN = 0, 1, 10, 6, 7, 8, 9, 12, 13
# Why a write was refused (enum fence_stale_reason) and what it was checked
# against (enum fence_object_kind).
REASONS = {0: 'older', 1: 'repeat'}
KINDS = {0: None, 1: 'table', 2: 'resource'}


class Error(Exception):
    """A fence call failed.  status: the fence_status number; status_name:
    its C name ("FENCE_ECONN"); message: the library's message for that
    call (never a password)."""

    def __init__(self, status, message, status_name=None):
        self.status = status
        self.status_name = status_name or 'FENCE_%d' % status
        self.message = message
        super().__init__('%s (%s)' % (message, self.status_name))


class InvalidArgument(Error, ValueError):
    """FENCE_EINVAL: an argument the library refused (a bad name, a TTL
    out of range, a malformed URL ...)."""


class Busy(Error):
    """FENCE_BUSY: the lease is held by another owner."""


class Timeout(Busy):
    """FENCE_TIMEOUT: still held by another owner when wait_ms ran out."""


class Lost(Error):
    """FENCE_LOST: the lease was lost (expired, deleted or taken) before
    the call that raised this."""


class Stale(Error):
    """A store refused a write: FENCE_STALE, a newer holder has written
    (SQLSTATE 23Q01, SQLite's "fence:stale"), or, as the subclass NoToken,
    FENCE_ENOTOKEN (23Q02, "fence:notoken").  offered: the refused token;
    highest: the highest the object has accepted; object: the table or
    resource; kind: 'table', 'resource' or None; reason: 'older' or
    'repeat' (an equal token from another holder); holder: the holder
    recorded with the highest ('' when none).  The numbers are 0 and the
    names '' when the store did not say."""

    def __init__(self, status, message, status_name=None, offered=0, highest=0, object='',
                 kind=None, reason=None, holder=''):
        super().__init__(status, message, status_name)
        self.offered, self.highest, self.object = offered, highest, object
        self.kind, self.reason, self.holder = kind, reason, holder


class NoToken(Stale):
    """FENCE_ENOTOKEN: the store refused a write that carried no valid
    token (none bound in this transaction, or a malformed one)."""


_CLASSES = {EINVAL: InvalidArgument, BUSY: Busy, TIMEOUT: Timeout, LOST: Lost, STALE: Stale,
            ENOTOKEN: NoToken}


def from_status(lib, status, message):
    """The exception for status (a library's fence_status), with message,
    or the library's text for status when message is empty."""
    name = lib.fence_status_name(status).decode()
    if not message:
        message = lib.fence_strerror(status).decode()
    return _CLASSES.get(status, Error)(status, message, name)


def stale_from(lib, status, info, message):
    """A Stale (or NoToken) from a classifier's status and fence_stale."""
    cls = NoToken if status == ENOTOKEN else Stale
    return cls(status, message, lib.fence_status_name(status).decode(),
               offered=info.offered, highest=info.highest,
               object=info.object.decode('utf-8', 'replace'), kind=KINDS.get(info.kind),
               reason=REASONS.get(info.reason) if status == STALE else None,
               holder=info.holder.decode('ascii', 'replace'))
