"""Messages between the evaluator and its worker processes, over a socket.

Parent to worker: pickle (the worker trusts the parent), with each large tensor's bytes in
a frame of its own after it. Worker to parent: never pickle.
A worker has run model-written code, so anything it sends is untrusted; unpickling it in
the parent would let that code run there. Workers reply with a JSON header and raw tensor
bytes instead: :func:`decode_reply` only builds dicts, lists, numbers, strings and plain
``torch.Tensor`` objects of allow-listed dtypes, and refuses messages over a size limit.

Each frame is an 8-byte big-endian length followed by its payload. This module does no
evaluation; it moves bytes.
"""

from __future__ import annotations

import array
import base64
import contextlib
import ctypes
import fcntl
import io
import json
import math
import mmap
import os
import pickle
import socket
import struct
import tempfile
import threading
import time
import weakref
from typing import Any

_LENGTH = struct.Struct(">Q")
#: A request's first frame starts with its count of large tensors and of sealed files passed.
_COUNTS = struct.Struct(">QQ")

#: torch dtypes a worker may send, by name. Anything else is refused.
TENSOR_DTYPES = (
    "float64", "float32", "float16", "bfloat16", "complex64", "complex128",
    "int64", "int32", "int16", "int8", "uint8", "bool",
    "float8_e4m3fn", "float8_e5m2",
)

#: Default ceiling on one reply from a worker (bytes).
DEFAULT_MAX_REPLY_BYTES = 8 << 30


class WireError(Exception):
    """The other side closed the connection or sent something malformed."""


#: The most memory a frame's declared length earns before its bytes arrive: the buffer
#: then grows with what is received (a worker declaring 8 GiB and sending nothing held
#: 8 GiB of the parent: red-team round 26b).
_FIRST_BUFFER = 64 << 20


class _Frame(bytearray):
    """A received reply's bytes: a bytearray that can be weakly referenced, so that
    :class:`ReplyMemory` learns when the last tensor viewing it is gone."""

    __slots__ = ("__weakref__",)


#: Replies smaller than this are never spilled (nor counted): only large ones matter.
SPILL_ABOVE = 16 << 20


class ReplyMemory:
    """The parent's memory for the replies of all its workers at once.

    Each reply is bounded alone (its worker's group memory, ``max_reply_bytes``), but
    several workers replying together could make the parent hold their sum, charged to
    no group. A reply of :data:`SPILL_ABOVE` bytes or more is received into the parent's
    memory only while the large replies it still holds (until the last tensor made from
    one is gone) leave room for it under ``budget_bytes``; otherwise it is received into
    an unnamed file in ``spill_dir`` (the system's temporary folder by default) mapped
    into memory, whose pages the kernel may write back and drop. Spilling costs time,
    never a verdict: the reply decodes the same."""

    def __init__(self, budget_bytes: int | None = None, spill_dir: str | None = None) -> None:
        #: None: the default, a quarter of the machine's memory (read when the first large
        #: reply comes, not when this module is imported).
        self.budget_bytes = budget_bytes
        self.spill_dir = spill_dir
        self.held = 0
        self.spilled = 0  # replies received into a file, for tests and diagnostics
        # Reentrant: a frame's finalizer (``_release``) may run in any thread, this one too
        self._lock = threading.RLock()

    def buffer(self, size: int) -> bytearray | mmap.mmap:
        """Where a reply of ``size`` bytes is received."""
        if size < SPILL_ABOVE:
            return _Frame(min(size, _FIRST_BUFFER))
        if self.hold(size):
            frame = _Frame(min(size, _FIRST_BUFFER))
            weakref.finalize(frame, self._release, size)
            return frame
        return self.spill(size)

    def hold(self, size: int) -> bool:
        """Count ``size`` bytes as held when they fit the budget (the holder gives them
        back with :meth:`_release`); False, one more reply spilled, when they do not."""
        with self._lock:
            if self.budget_bytes is None:
                self.budget_bytes = _default_budget()
            if self.held + size <= self.budget_bytes:
                self.held += size
                return True
            self.spilled += 1
            return False

    def spill(self, size: int) -> bytearray | mmap.mmap:
        """An unnamed file of ``size`` bytes mapped into memory (a growing buffer where no
        file can be made)."""
        for folder in dict.fromkeys((self.spill_dir, None)):  # the folder given, else the system's
            try:
                with tempfile.TemporaryFile(dir=folder) as handle:  # unnamed: no other process can open it
                    handle.truncate(size)  # sparse: the disk holds only what arrives
                    return mmap.mmap(handle.fileno(), size)
            except OSError:
                continue
        return _Frame(min(size, _FIRST_BUFFER))  # nowhere to spill: a reply never fails for it

    def _release(self, size: int) -> None:
        with self._lock:
            self.held -= size


def _default_budget() -> int:
    """A quarter of the machine's memory (16 GiB where it cannot be read): the quarter the
    workers' common memory limit leaves (``eval.workers_memory_gb``). It was at most 8 GiB
    until the forty-fifth session; a recording of KernelBench's largest layers replies
    with more (about 8.3 GiB for ``56_Matmul_Sigmoid_Sum``'s two plans), so every such
    reply was received into a file."""
    from kz_core.evaluate.sandbox import machine_memory_bytes  # sandbox imports this module

    return (machine_memory_bytes() or 16 << 30) // 4


#: The parent's budget for replies in flight (:func:`configure_reply_memory` sets it).
REPLY_MEMORY = ReplyMemory()


def configure_reply_memory(budget_bytes: int | None = None, spill_dir: str | None = None) -> ReplyMemory:
    """Set this process's budget for replies in flight (None: a quarter of the machine's
    memory) and where replies past it are spilled."""
    with REPLY_MEMORY._lock:
        REPLY_MEMORY.budget_bytes = None if budget_bytes is None else int(budget_bytes)
        REPLY_MEMORY.spill_dir = spill_dir
    return REPLY_MEMORY


class LentFile:
    """Memory the parent lends a worker for one reply's large tensors: an unnamed memory
    file (``memfd``) sent with the request, of the reply's most bytes (sparse: it holds
    only what is written). The worker copies each tensor of :data:`LENT_ABOVE` bytes or
    more into it, from the GPU straight into memory the parent then maps, instead of
    sending the bytes through the socket: two copies fewer, while the worker holds the GPU
    (a recording of KernelBench's largest layers replies with about 8 GiB). A recording
    makes its host copies in the file to begin with (:meth:`empty`), and its reply names
    them where they lie: no copy at all when it replies.

    A worker has run model-written code, which can write the file too: the parent seals it
    (no more writes, no change of size, by anyone) before reading a byte, at the length
    the reply names, and refuses a reply whose file cannot be sealed so or has another
    length then (its worker kept it writable, mapped or pinned, or sealed it itself)."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.size = fd, size
        #: Once a reply's bytes are mapped from it: the sealed file, to pass them on (:class:`SealedReply`).
        self.kept: SealedReply | None = None
        #: In the worker: tensors made in the file (:meth:`empty`), by address: ``(offset, bytes)``.
        self.regions: dict[int, tuple[int, int]] = {}
        self.end = 0  # the end of the last of them

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """In the worker: an uninitialised CPU tensor made in the file itself, for a value
        the reply will carry (a recording's host copies of its constants), so that the
        reply names it where it lies instead of copying it in; None below
        :data:`LENT_ABOVE` bytes, past the file's size, or where it cannot be mapped.
        Every such tensor is unmapped by :meth:`unmap` once the reply is encoded
        (:func:`encode_reply`), before it goes: nothing may touch it after."""
        import torch

        nbytes = math.prod(shape) * dtype.itemsize
        at = -(-self.end // _LENT_ALIGN) * _LENT_ALIGN
        if nbytes < LENT_ABOVE or at + nbytes > self.size or self.fd < 0:
            return None
        address = _LIBC.mmap(None, nbytes, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, self.fd, at)
        if address in (None, _MAP_FAILED):
            return None
        _LIBC.madvise(address, nbytes, _MADV_DONTFORK)  # a child forked meanwhile does not keep it writable
        self.regions[address] = (at, nbytes)
        self.end = at + nbytes
        memory = (ctypes.c_uint8 * nbytes).from_address(address)
        return torch.frombuffer(memory, dtype=torch.uint8).view(dtype).reshape(shape)

    def region(self, value: Any) -> tuple[int, int] | None:
        """``(offset, bytes)`` of the file where ``value`` is exactly one of :meth:`empty`'s
        tensors (all of it, as made), else None."""
        if not self.regions or value.device.type != "cpu" or not value.is_contiguous():
            return None
        found = self.regions.get(value.data_ptr())
        return found if found is not None and found[1] == value.nbytes else None

    def unmap(self) -> None:
        """Unmap :meth:`empty`'s tensors: the parent seals the file, which it refuses while
        a process can still write it."""
        for address, (_, nbytes) in self.regions.items():
            _LIBC.munmap(address, nbytes)
        self.regions.clear()

    @classmethod
    def create(cls, size: int) -> LentFile | None:
        """A file of ``size`` bytes; None where memory files cannot be made (the reply then
        carries every tensor's bytes itself)."""
        try:
            fd = os.memfd_create("kz-reply", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        except (AttributeError, OSError):
            return None
        try:
            os.ftruncate(fd, size)
        except OSError:
            os.close(fd)
            return None
        return cls(fd, size)

    def close(self) -> None:
        self.unmap()
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1

    def seal(self, used: int) -> None:
        """Cut the file to ``used`` bytes (what the worker wrote past them is let go) and
        seal it; WireError if it cannot be, or is not ``used`` bytes long once sealed."""
        try:
            os.ftruncate(self.fd, used)
            fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            length = os.fstat(self.fd).st_size
        except OSError as exc:
            raise WireError(f"the reply's memory file could not be sealed ({exc.strerror or exc}): its worker kept it writable, mapped or sealed") from None
        if length != used:
            raise WireError(f"the reply's memory file is {length} bytes once sealed, not the {used} its reply names")

    def take(self, used: int, memory: ReplyMemory | None) -> bytearray | mmap.mmap:
        """The sealed file's ``used`` bytes as the parent's: mapped copy-on-write (torch
        writes tensors; the file stays as it is), counted in ``memory`` like a reply
        received; past its budget, copied into what :meth:`ReplyMemory.buffer` gives."""
        self.seal(used)
        mapped = mmap.mmap(self.fd, used, access=mmap.ACCESS_COPY)
        counted = memory is not None and used >= SPILL_ABOVE
        if counted and not memory.hold(used):  # type: ignore[union-attr]
            spilled = memory.spill(used)  # type: ignore[union-attr]
            if len(spilled) < used:
                spilled.extend(bytes(used - len(spilled)))  # type: ignore[union-attr]
            spilled[:used] = mapped
            mapped.close()
            return spilled
        if counted:
            weakref.finalize(mapped, memory._release, used)  # type: ignore[union-attr]
        self.kept = SealedReply(self.fd, mapped, used)
        return mapped


class SealedReply:
    """A reply's sealed lent file as the parent keeps it while its bytes are mapped: a
    request may pass those bytes on by the file (:func:`send_request`'s ``files``), and
    the worker reads them from it, instead of receiving them through the socket (a plan's
    constants, sent from the candidate's recording to its executor). Only bytes the parent
    has not written are passed so: its mapping is copy-on-write, and a page it wrote is
    its own, no longer the file's (:func:`_unwritten`). The file is closed when the
    mapping goes."""

    def __init__(self, fd: int, mapped: mmap.mmap, length: int) -> None:
        self.fd = os.dup(fd)
        self.length = length
        view = ctypes.c_char.from_buffer(mapped)
        self.base = ctypes.addressof(view)
        del view  # a buffer exported keeps the mapping from being closed
        self._mapped = weakref.ref(mapped)
        weakref.finalize(mapped, os.close, self.fd)

    def place(self, tensor: Any) -> int | None:
        """Where ``tensor``'s bytes are in the file, if they are all there and unwritten."""
        start = tensor.data_ptr()
        if self._mapped() is None or not self.base <= start <= start + tensor.nbytes <= self.base + self.length:
            return None
        return start - self.base if _unwritten(start, tensor.nbytes) else None


def _unwritten(address: int, size: int) -> bool:
    """No page of ``size`` bytes at ``address`` (in a private mapping of a file) has been
    written by this process: ``/proc/self/pagemap`` shows none of them present and
    anonymous (a written page is a copy of the process's own), nor swapped."""
    import numpy

    if size <= 0:
        return True
    page = mmap.PAGESIZE
    first, last = address // page, (address + size - 1) // page
    wanted = (last - first + 1) * 8
    try:
        with open("/proc/self/pagemap", "rb", buffering=0) as pagemap:
            pagemap.seek(first * 8)
            data = bytearray()
            while len(data) < wanted:
                chunk = pagemap.read(wanted - len(data))
                if not chunk:
                    return False
                data += chunk
    except OSError:
        return False
    entries = numpy.frombuffer(bytes(data), dtype=numpy.uint64)
    present, swapped, file_page = (entries >> numpy.uint64(63)) & 1, (entries >> numpy.uint64(62)) & 1, (entries >> numpy.uint64(61)) & 1
    return not bool((swapped | (present & (1 - file_page))).any())


#: Tensors of a reply of at least this many bytes go through the parent's lent file when
#: the request brought one.
LENT_ABOVE = 1 << 20
#: Where each tensor starts in a lent file (:meth:`LentFile.empty`): an offset a mapping can
#: start at (a page at least: aligned for every dtype).
_LENT_ALIGN = max(4096, mmap.ALLOCATIONGRANULARITY)
_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.mmap.restype = ctypes.c_void_p
_LIBC.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_LIBC.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_LIBC.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_MAP_FAILED = ctypes.c_void_p(-1).value
_MADV_DONTFORK = 10


def _recv_exactly(sock: socket.socket, size: int, deadline: float | None = None, into: bytearray | mmap.mmap | memoryview | None = None) -> bytearray | mmap.mmap | memoryview:
    """``size`` bytes, before ``deadline`` (``time.monotonic()``) when one is given: a
    socket's timeout bounds each ``recv`` alone, and a reply trickled a byte at a time
    would restart it with every byte (round 26b: a 20 s limit held a batch for hours).
    ``into``: a buffer to receive them in (a bytearray grows as they come; a mapped file
    has the whole size)."""
    buffer = bytearray(min(size, _FIRST_BUFFER)) if into is None else into
    received = 0
    while received < size:
        if received == len(buffer):  # doubled as the bytes come, never past the size declared
            buffer.extend(bytes(min(size - received, len(buffer))))  # type: ignore[union-attr]
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{received} of {size} bytes received in the time allowed")
            sock.settimeout(remaining)
        count = sock.recv_into(memoryview(buffer)[received:], len(buffer) - received)
        if count == 0:
            raise WireError("connection closed")
        received += count
    return buffer


class Encoded(list):
    """A message as the buffers it is made of, sent one after another as one frame: a
    large tensor's bytes are sent from its own memory, not first copied into one string
    (which cost a worker two more copies of a recording's constants, gigabytes for
    KernelBench's largest layers, while it held the GPU)."""

    @property
    def nbytes(self) -> int:
        return sum(memoryview(part).nbytes for part in self)

    def __bytes__(self) -> bytes:
        return b"".join(self)


def send_frame(sock: socket.socket, payload: bytes | bytearray | memoryview | Encoded, fds: tuple[int, ...] = ()) -> None:
    """One frame; ``fds``: descriptors sent with its length (``SCM_RIGHTS``)."""
    size = payload.nbytes if isinstance(payload, Encoded) else len(payload)
    length = _LENGTH.pack(size)
    if fds:
        sent = sock.sendmsg([length], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        sock.sendall(length[sent:])
    else:
        sock.sendall(length)
    for part in payload if isinstance(payload, Encoded) else (payload,):
        sock.sendall(part)


def _recv_length(sock: socket.socket, deadline: float | None = None, fds: list[int] | None = None) -> int:
    """A frame's length; with ``fds``, the descriptors sent with it are added to it (at
    most :data:`_MOST_FDS`: a frame that brings more is refused, and none is kept)."""
    if fds is None:
        (size,) = _LENGTH.unpack(_recv_exactly(sock, _LENGTH.size, deadline))
        return size
    data = b""
    while len(data) < _LENGTH.size:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{len(data)} of {_LENGTH.size} bytes received in the time allowed")
            sock.settimeout(remaining)
        chunk, ancillary, flags, _ = sock.recvmsg(_LENGTH.size - len(data), socket.CMSG_SPACE(_MOST_FDS * 4), socket.MSG_CMSG_CLOEXEC)
        for level, kind, items in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.extend(array.array("i", items[: len(items) - len(items) % 4]))
        if flags & socket.MSG_CTRUNC or len(fds) > _MOST_FDS:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            fds.clear()
            raise WireError("a frame sent with more descriptors than it may have")
        if not chunk:
            raise WireError("connection closed")
        data += chunk
    (size,) = _LENGTH.unpack(data)
    return size


#: The most descriptors a frame may bring (a request brings its lent file and the sealed
#: files it passes bytes by).
_MOST_FDS = 8


def recv_frame(sock: socket.socket, max_bytes: int = DEFAULT_MAX_REPLY_BYTES, memory: ReplyMemory | None = None) -> bytearray | mmap.mmap:
    """One frame. A socket with a timeout gives the whole frame that long, its length and
    every byte of it, from now. ``memory``: the budget a large frame is received under
    (a worker's reply in the parent)."""
    timeout = sock.gettimeout()
    deadline = time.monotonic() + timeout if timeout else None
    size = _recv_length(sock, deadline)
    if size > max_bytes:
        raise WireError(f"message of {size} bytes exceeds the limit of {max_bytes} bytes")
    return _recv_exactly(sock, size, deadline, None if memory is None or size == 0 else memory.buffer(size))


# --- parent -> worker: pickle ----------------------------------------------------------


#: Tensors of at least this many bytes travel out of band: their bytes are sent from
#: their own memory and received into the tensor the worker uses, not pickled (torch
#: pickles a tensor through a copy made by ``torch.save``: about 0.2 GB/s, which made an
#: executor's ``prepare`` of an 8 GiB layer's plans take half a minute).
OUT_OF_BAND_BYTES = 1 << 20


class _RequestPickler(pickle.Pickler):
    """Pickle, with each large plain tensor replaced by its number in ``tensors``, whose
    bytes follow the pickle as frames of their own."""

    def __init__(self, file: Any, files: tuple[SealedReply, ...] = ()) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.tensors: list[Any] = []
        self.files = files
        self.passed: dict[int, int] = {}  # descriptor of a file in ``files`` -> its place among those sent

    def reducer_override(self, obj: Any) -> Any:
        import torch

        if type(obj) is not torch.Tensor or not _whole_plain_tensor(obj):
            return NotImplemented
        dtype = str(obj.dtype).removeprefix("torch.")
        for file in self.files:
            at = file.place(obj)
            if at is not None and (file.fd in self.passed or len(self.passed) < _MOST_FDS - 1):
                slot = self.passed.setdefault(file.fd, len(self.passed))
                return _placed_tensor, (slot, at, obj.nbytes, dtype, tuple(obj.shape))
        self.tensors.append(obj)
        return _received_tensor, (len(self.tensors) - 1, dtype, tuple(obj.shape))


def _whole_plain_tensor(tensor: Any) -> bool:
    """A large, dense, contiguous CPU tensor that is all of its storage (so that nothing
    pickle would keep of it, its offset, strides or storage, is lost), without autograd."""
    import torch

    return (
        tensor.device.type == "cpu"
        and tensor.layout == torch.strided
        and not tensor.requires_grad
        and not tensor.is_conj()
        and not tensor.is_neg()
        and str(tensor.dtype).removeprefix("torch.") in TENSOR_DTYPES
        and tensor.nbytes >= OUT_OF_BAND_BYTES
        and tensor.is_contiguous()
        and tensor.storage_offset() == 0
        and tensor.untyped_storage().nbytes() == tensor.nbytes
    )


#: The tensors of the request being unpickled in this thread (their bytes, received).
_RECEIVING = threading.local()


def _received_tensor(index: int, dtype: str, shape: tuple[int, ...]) -> Any:
    import torch

    return _RECEIVING.tensors[index].view(getattr(torch, dtype)).reshape(shape)


def _own_bytes(size: int) -> tuple[Any, memoryview]:
    """A tensor of ``size`` bytes in torch's own memory (its storage stays resizable, as a
    pickled one's), and that memory as a buffer to write, which holds no reference to the
    storage (a NumPy view would, until the garbage collector ran, and kept the storage from
    being resized)."""
    import torch

    tensor = torch.empty(size, dtype=torch.uint8)
    return tensor, memoryview((ctypes.c_char * size).from_address(tensor.data_ptr())).cast("B")


def _placed_tensor(slot: int, at: int, size: int, dtype: str, shape: tuple[int, ...]) -> Any:
    """A tensor whose bytes the parent passed by a sealed file: read from it into memory
    of the tensor's own."""
    import torch

    tensor, into = _own_bytes(size)
    if size:
        done = 0
        while done < size:
            count = os.preadv(_RECEIVING.files[slot], [into[done:]], at + done)
            if count <= 0:
                raise WireError("a sealed file the parent passed ended early")
            done += count
    return tensor.view(getattr(torch, dtype)).reshape(shape)


def _byte_view(tensor: Any) -> memoryview:
    """A contiguous CPU tensor's bytes, without a copy: what is sent of it."""
    import torch

    return memoryview(tensor.reshape(-1).view(torch.uint8).numpy())


def send_request(sock: socket.socket, request: dict[str, Any], lent: LentFile | None = None, files: tuple[SealedReply, ...] = ()) -> None:
    """A frame of the tensor count, the count of sealed files and the pickle (with those
    files, then ``lent``'s, for the reply's large tensors), then a frame of each large
    tensor's bytes. ``files``: replies' sealed files whose unwritten bytes the request's
    tensors may be passed by (only a file of what the receiving worker may read: the same
    candidate's own recording, sent to its executor)."""
    stream = io.BytesIO()
    pickler = _RequestPickler(stream, files)
    pickler.dump(request)
    fds = (*pickler.passed, *((lent.fd,) if lent is not None else ()))  # in the order of their places
    send_frame(sock, Encoded([_COUNTS.pack(len(pickler.tensors), len(pickler.passed)), stream.getbuffer()]), fds)
    for tensor in pickler.tensors:
        send_frame(sock, _byte_view(tensor.detach()))


#: In a worker: the file the parent lent with the request being answered, for its reply.
_lent_for_reply: LentFile | None = None


def recv_request(sock: socket.socket) -> dict[str, Any]:
    """A request from the parent; the file it lent is kept for :func:`send_reply`."""
    global _lent_for_reply
    fds: list[int] = []
    size = _recv_length(sock, fds=fds)
    if _lent_for_reply is not None:
        _lent_for_reply.close()
    frame = _recv_exactly(sock, size)
    count, passed = _COUNTS.unpack_from(frame)
    if len(fds) - passed not in (0, 1):
        for fd in fds:
            os.close(fd)
        raise WireError(f"a request with {len(fds)} descriptors names {passed} sealed files")
    files = fds[:passed]
    _lent_for_reply = LentFile(fds[passed], os.fstat(fds[passed]).st_size) if len(fds) > passed else None
    tensors = []
    for _ in range(count):
        # From the parent, which the worker trusts: received at once into memory of their
        # whole size, torch's own.
        (size,) = _LENGTH.unpack(_recv_exactly(sock, _LENGTH.size))
        tensor, into = _own_bytes(size)
        _recv_exactly(sock, size, into=into)
        tensors.append(tensor)
    _RECEIVING.tensors, _RECEIVING.files = tensors, files
    try:
        return pickle.loads(memoryview(frame)[_COUNTS.size :])
    finally:
        _RECEIVING.tensors, _RECEIVING.files = [], []
        for fd in files:
            with contextlib.suppress(OSError):
                os.close(fd)


# --- worker -> parent: JSON + tensor bytes ---------------------------------------------


def encode_reply(reply: Any, lent: LentFile | None | str = "the request's") -> Encoded:
    """Encode dicts/lists/tuples/str/int/float/bool/None and torch tensors, nothing else:
    the message's parts, each tensor's bytes a view of its host copy (``bytes()`` of the
    result is the whole message). With ``lent`` (by default the file the parent lent with
    the request being answered), each tensor of :data:`LENT_ABOVE` bytes or more is named
    where it lies in that file instead: where it was made (:meth:`LentFile.empty`), else
    where it is copied, from its device straight into the parent's memory."""
    if isinstance(lent, str):
        lent = _lent_for_reply
    blobs: list[Any] = []
    large: list[tuple[Any, dict[str, Any]]] = []  # (tensor, its entry in the header) for the lent file

    def convert(value: Any) -> Any:
        import torch

        if isinstance(value, torch.Tensor):
            dtype = str(value.dtype).removeprefix("torch.")
            if dtype not in TENSOR_DTYPES:
                raise TypeError(f"cannot send a tensor of dtype {value.dtype}")
            entry = {"__tensor__": len(blobs), "dtype": dtype, "shape": list(value.shape)}
            if lent is not None and value.nbytes >= LENT_ABOVE:
                blobs.append(b"")
                large.append((value, entry))
                return entry
            blobs.append(_host_bytes(value))
            return entry
        if isinstance(value, dict):
            return {"__dict__": [[convert(k), convert(v)] for k, v in value.items()]}
        if isinstance(value, (list, tuple)):
            return {"__list__" if isinstance(value, list) else "__tuple__": [convert(v) for v in value]}
        if value is None or isinstance(value, (bool, int, str)):
            return value
        if isinstance(value, float):
            return {"__float__": repr(float(value))}  # a subclass (numpy.float64) may repr otherwise
        if isinstance(value, bytes):
            return {"__bytes__": base64.b64encode(value).decode("ascii")}
        raise TypeError(f"cannot send a value of type {type(value).__name__}")

    converted = convert(reply)
    if large:
        # Each lies in the file: where it was made there (LentFile.empty: a recording's
        # constants), else copied into a place made for it; each place named once.
        named: set[int] = set()
        fits = True
        for value, entry in large:
            region = lent.region(value)  # type: ignore[union-attr]
            if region is None or region[0] in named:
                made = lent.empty(tuple(value.shape), value.dtype)  # type: ignore[union-attr]
                if made is None:
                    fits = False
                    break
                made.copy_(value.detach())  # from its device straight into the file
                region = lent.region(made)  # type: ignore[union-attr]
            named.add(region[0])  # type: ignore[index]
            entry["at"] = region[0]  # type: ignore[index]
        if fits:
            converted = {"__lent__": lent.end, "value": converted}  # type: ignore[union-attr]
        else:  # no room, or no memory to map it in: the bytes travel in the reply
            for value, entry in large:
                entry.pop("at", None)
                # (copies where tensors were made in the file: it is unmapped before the reply goes)
                blobs[entry["__tensor__"]] = _host_bytes(value.clone() if lent.regions else value)  # type: ignore[union-attr]
        # Before the parent seals the file, which it refuses while a process can write it.
        lent.unmap()  # type: ignore[union-attr]
    header = json.dumps(converted).encode("utf-8")
    parts = Encoded([_LENGTH.pack(len(header)), header, _LENGTH.pack(len(blobs))])
    for blob in blobs:
        parts += [_LENGTH.pack(memoryview(blob).nbytes), blob]
    return parts


def _host_bytes(value: Any) -> memoryview | bytes:
    """A tensor's bytes as sent in a reply: a view of its host copy (of itself on a CPU)."""
    host = value.detach().to("cpu").contiguous()
    return _byte_view(host) if host.numel() else b""


#: How deeply a reply's values may nest (kz's own replies nest a few levels; a JSON
#: header nested 200,000 deep raised RecursionError in the parent and ended the batch).
MAX_DEPTH = 64
#: The most dimensions a tensor in a reply may have (torch's own limit is 64).
MAX_DIMS = 64
#: The largest JSON header a reply may have, and the most lists and dicts it may open.
#: Tensor bytes are not in it; kz's largest headers are plans (20,000 steps at most, a few
#: MB). Each JSON container costs the parent about 20 times its bytes: a 120 MB header of
#: empty dicts took 3.35 GB (red-team round 26c).
MAX_HEADER_BYTES = 64 << 20
MAX_CONTAINERS = 2_000_000


def decode_reply(payload: bytes | bytearray | mmap.mmap | Encoded, lent: LentFile | None = None, memory: ReplyMemory | None = None) -> Any:
    """Rebuild what :func:`encode_reply` encoded; raises WireError on anything else.

    Whatever the payload holds, the only exception is :class:`WireError` (a malformed
    reply is its worker's error, never the batch's: red-team round 26b ended a batch with
    a RecursionError, a ValueError for a 5,000-digit integer and a RuntimeError for a
    shape of ``[-1, -1]``). Each tensor's bytes are read once: a header naming one blob
    300 times made 300 copies of it in the parent. ``lent``: the file lent with the
    request, where tensors naming an offset (``at``) are, sealed before they are read;
    ``memory``: the budget it counts in."""
    if not isinstance(payload, (bytearray, mmap.mmap)):
        payload = bytearray(bytes(payload) if isinstance(payload, Encoded) else payload)  # tensors are views of it, and torch writes tensors
    try:
        return _decode(memoryview(payload), lent, memory)
    except WireError:
        raise
    except Exception as exc:  # noqa: BLE001 - untrusted bytes: any failure is the reply's
        raise WireError(f"malformed reply: {type(exc).__name__}: {str(exc)[:200]}") from None


def _decode(view: memoryview, lent: LentFile | None = None, memory: ReplyMemory | None = None) -> Any:
    import torch

    offset = 0
    (header_size,) = _LENGTH.unpack_from(view, offset)
    offset += _LENGTH.size
    if header_size > MAX_HEADER_BYTES:
        raise WireError(f"a reply header of {header_size} bytes (at most {MAX_HEADER_BYTES})")
    text = bytes(view[offset : offset + header_size])
    if text.count(b"[") + text.count(b"{") > MAX_CONTAINERS:  # counted before json builds them
        raise WireError(f"a reply header opening more than {MAX_CONTAINERS} lists and dicts")
    header = json.loads(text.decode("utf-8"))
    del text
    offset += header_size
    (count,) = _LENGTH.unpack_from(view, offset)
    offset += _LENGTH.size
    blobs = []
    for _ in range(count):
        (size,) = _LENGTH.unpack_from(view, offset)
        offset += _LENGTH.size
        if offset + size > len(view):
            raise WireError("truncated tensor data")
        blobs.append(view[offset : offset + size])
        offset += size
    used: set[int] = set()
    shared: memoryview | None = None  # the lent file's bytes, once sealed
    regions: list[tuple[int, int]] = []
    if isinstance(header, dict) and "__lent__" in header:
        length, header = header["__lent__"], header.get("value")
        if lent is None or type(length) is not int or not 0 < length <= lent.size:
            raise WireError("a reply names a lent file that was not lent, or more of it than there is")
        shared = memoryview(lent.take(length, memory))

    def build(value: Any, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise WireError(f"values nested more than {MAX_DEPTH} deep")
        if isinstance(value, dict):
            if "__tensor__" in value:
                dtype_name = value["dtype"]
                if dtype_name not in TENSOR_DTYPES:
                    raise WireError(f"tensor dtype {str(dtype_name)[:40]!r} is not allowed")
                dtype = getattr(torch, dtype_name)
                shape, index = value["shape"], value["__tensor__"]
                if not (isinstance(shape, list) and len(shape) <= MAX_DIMS and all(type(s) is int and s >= 0 for s in shape)):
                    raise WireError("malformed tensor shape (a list of at most 64 non-negative integers)")
                if type(index) is not int or not 0 <= index < len(blobs) or index in used:
                    raise WireError("a tensor names tensor data that is missing or named already")
                used.add(index)
                data = blobs[index]
                numel = math.prod(shape)
                itemsize = torch.empty((), dtype=dtype).element_size()
                if "at" in value:
                    at = value["at"]
                    if shared is None or type(at) is not int or not 0 <= at <= len(shared) or len(data):
                        raise WireError("a tensor names a place in the lent file that is not there")
                    data = shared[at : at + numel * itemsize]
                    regions.append((at, at + len(data)))
                if len(data) != numel * itemsize:
                    raise WireError(f"tensor of shape {shape} and dtype {dtype_name} has {len(data)} bytes")
                if numel == 0:
                    return torch.empty(shape, dtype=dtype)
                # The tensor is the received frame's own bytes, not a copy of them: a reply
                # of B bytes cost the parent 2B (red-team round 27: a worker whose group
                # held 32 MiB made the parent peak at 5.4 GB with a 2.5 GiB tensor).
                return torch.frombuffer(data, dtype=torch.uint8).view(dtype).reshape(shape)
            if "__float__" in value:
                return float(value["__float__"])
            if "__bytes__" in value:
                return base64.b64decode(value["__bytes__"], validate=True)
            if "__list__" in value:
                return [build(v, depth + 1) for v in value["__list__"]]
            if "__tuple__" in value:
                return tuple(build(v, depth + 1) for v in value["__tuple__"])
            if "__dict__" in value:
                return {build(k, depth + 1): build(v, depth + 1) for k, v in value["__dict__"]}
            raise WireError(f"unknown encoded value (a dict of {len(value)} keys)")
        if value is None or isinstance(value, (bool, int, str)):
            return value
        raise WireError(f"unexpected JSON value of type {type(value).__name__}")  # never its repr: it may be huge

    value = build(header, 0)
    regions.sort()
    if any(start < end for (_, end), (start, _) in zip(regions, regions[1:])):
        raise WireError("two tensors name the same bytes of the lent file")  # each its own, as in the reply itself
    return value


def send_reply(sock: socket.socket, reply: Any) -> None:
    """Reply to the request last received, in the file it lent where it lent one (once:
    a second reply, a failure's, comes whole). Only that file is let go: a reply whose
    sending ended after the next request came (a thread's) leaves that request's file."""
    global _lent_for_reply
    lent = _lent_for_reply
    try:
        send_frame(sock, encode_reply(reply))  # called with the reply alone, as ever (cheats wrap it so)
    finally:
        if lent is not None:
            lent.close()
            if _lent_for_reply is lent:
                _lent_for_reply = None


def lent_empty(shape: tuple[int, ...], dtype: Any) -> Any:
    """In a worker answering a request that lent a file: :meth:`LentFile.empty` of it, else None."""
    return _lent_for_reply.empty(shape, dtype) if _lent_for_reply is not None else None


def recv_reply(sock: socket.socket, max_bytes: int = DEFAULT_MAX_REPLY_BYTES, memory: ReplyMemory | None = REPLY_MEMORY, lent: LentFile | None = None) -> Any:
    """A worker's reply, received under the process's budget for replies in flight;
    ``lent``: the file lent with the request (:func:`send_request`)."""
    return decode_reply(recv_frame(sock, max_bytes, memory), lent, memory)
