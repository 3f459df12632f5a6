"""nbgrader preprocessors for `grade`: CappedExecute replaces Execute, two
more run after it.

- CappedExecute: stock Execute keeps every output message the kernel sends
  until the notebook is done, so a cell printing 800 MB in chunks made the
  trusted nbgrader process hold all of it (peak 2.4 GB). This one stops
  keeping a cell's output once it passed `max_output_bytes`, as the messages
  arrive; errors are always kept (shortened), since the verdict needs them.
  What the trusted side holds of a kernel's messages at any moment is
  bounded too (BoundedKernelClient): ZMQ refuses a message over
  MAX_KERNEL_MESSAGE_BYTES before holding it (the kernel's 800 MB of
  unflushed writes arrive as ONE message, which took a warm worker's fork to
  2.5 GB), and queues at most KERNEL_QUEUE_MESSAGES for the grader; the rest
  waits in the kernel, whose memory is the job's. A refused message cuts the
  IOPub connection (ZMQ does not reconnect after a protocol error): the cell
  gets a note that its output was dropped, and the connection is made again
  before the next cell. A cell's error still reaches the verdict: nbgrader
  takes it from the execute reply when its output was lost.
  It also starts the kernel with its own stdout and stderr on /dev/null:
  the kernel would otherwise inherit nbgrader's, the grader's log, where
  an os.write(1, ...) in a cell could forge lines the grader reads and,
  unbounded, grow the process that reads them (cell output
  travels over the kernel's messages, not those descriptors). Its timing
  marks go to `timing_file`, a file of the grader's outside the jail.
  With `skip_tail` it leaves out the code cells after the notebook's last
  graded cell (tail_start): the kernel runs the cells in order, so by then
  every graded cell has its output, and nothing a later cell does can change
  a score (the recheck never runs the course's own cells after it either).
  Each such cell gets a note that says so instead of its output.

- StderrIsNotFailure: stock nbgrader scores a test cell zero when anything
  reached stderr, so a correct answer that triggers a library warning loses
  its points. Failure must come from an exception: stderr text is kept,
  relabelled as stdout with a "[stderr]" prefix.
- CapOutputBytes: stock LimitOutput counts lines only, so one 100 MB line is
  kept in the autograded notebook, the gradebook and the feedback. This caps
  every cell's outputs in bytes.
"""
from __future__ import annotations

import itertools
import json
import os
import subprocess
import time

import nbformat
import zmq
import zmq.asyncio
from jupyter_client.asynchronous import AsyncKernelClient
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Bool, Integer, Unicode

DROPPED = "\n... output truncated by the grader: the cell printed more than its {cap}-byte limit ...\n"
TRUNCATED = "\n... output truncated by the grader: {n} bytes over the {cap}-byte limit ...\n"
REFUSED = ("\n... output truncated by the grader: the cell sent a message over the {mb} MB the grader takes "
           "at once ...\n")
# The most the trusted side holds of one kernel's messages: one message of
# MAX_KERNEL_MESSAGE_BYTES being decoded (about three times its size, as
# bytes, text and JSON) and KERNEL_QUEUE_MESSAGES queued, about 400 MB above
# the process's own size, whatever the kernel sends. An honest cell's
# message (a plot, a table) is far smaller.
MAX_KERNEL_MESSAGE_BYTES = 32 * 2**20
KERNEL_QUEUE_MESSAGES = 8


_BOUNDED_CONTEXTS: dict[int, zmq.Context] = {}  # pid -> the context (a forked child makes its own)
# Names of the IOPub monitors' inproc endpoints. Not id(socket): a closed
# socket's id comes back for the next one while its monitor's endpoint may
# still be bound in the shared context ("Address already in use").
_MONITOR_NUMBERS = itertools.count()


def _bounded_context() -> zmq.Context:
    """This process's context for kernel clients: every socket it opens
    refuses a message over MAX_KERNEL_MESSAGE_BYTES and queues at most
    KERNEL_QUEUE_MESSAGES."""
    context = _BOUNDED_CONTEXTS.get(os.getpid())
    if context is None or context.closed:
        context = zmq.asyncio.Context()
        context.setsockopt(zmq.MAXMSGSIZE, MAX_KERNEL_MESSAGE_BYTES)
        context.setsockopt(zmq.RCVHWM, KERNEL_QUEUE_MESSAGES)
        _BOUNDED_CONTEXTS[os.getpid()] = context
    return context


class BoundedKernelClient(AsyncKernelClient):
    """The kernel client of CappedExecute: every socket it opens refuses a
    message over MAX_KERNEL_MESSAGE_BYTES (ZMQ drops the connection before
    allocating it) and queues at most KERNEL_QUEUE_MESSAGES (what a kernel
    sends faster than the grader reads waits in the kernel's process). The
    IOPub socket is watched for the drop, so the cell can say so and the
    connection can be made again (refused_message, reconnect_iopub)."""

    def _context_default(self) -> zmq.Context:
        # One context per process, never terminated: a client's own context is
        # terminated by its __del__ whenever the garbage collector runs it, and
        # zmq's term waits for every socket of it, forever for one nobody closed
        # (a kernel that never started, a dropped IOPub socket's monitor). The
        # sockets are closed by stop_channels; the process's exit frees the rest.
        return _bounded_context()

    def connect_iopub(self, identity: bytes | None = None) -> zmq.Socket:
        socket = super().connect_iopub(identity)
        address = f"inproc://tinylm-iopub-{os.getpid()}-{next(_MONITOR_NUMBERS)}"
        socket.monitor(address, zmq.EVENT_DISCONNECTED | zmq.EVENT_HANDSHAKE_SUCCEEDED)
        # a plain socket (not asyncio), polled between cells; made by the context, which closes it at the end
        self._iopub_watch = self.context.socket(zmq.PAIR, socket_class=zmq.Socket)
        self._iopub_watch.connect(address)
        return socket

    def _watched(self, timeout_ms: int = 0) -> set[int]:
        """The IOPub socket's events since the last call."""
        from zmq.utils.monitor import parse_monitor_message
        watch, events = getattr(self, "_iopub_watch", None), set()
        while watch is not None and watch.poll(timeout_ms):
            events.add(parse_monitor_message(watch.recv_multipart())["event"])
            timeout_ms = 0
        return events

    def refused_message(self) -> bool:
        """Whether the IOPub connection was dropped since the last call (the
        kernel sent a message over the limit)."""
        return zmq.EVENT_DISCONNECTED in self._watched()

    def reconnect_iopub(self, within_s: float = 5.0) -> None:
        """A new IOPub socket (and watch) in place of the dropped one; returns
        once it is connected, so the next cell's output is not sent to nobody."""
        old, self._iopub_channel = self._iopub_channel, None
        if old is not None:
            old.close()
        self._iopub_watch.close(linger=0)
        self.iopub_channel.start()
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline and zmq.EVENT_HANDSHAKE_SUCCEEDED not in self._watched(100):
            pass
        time.sleep(0.05)  # the subscription travels right behind the handshake

    def stop_channels(self) -> None:
        watch = getattr(self, "_iopub_watch", None)
        if watch is not None:
            watch.close(linger=0)
        super().stop_channels()


NOT_RUN = ("[not run while grading: this cell comes after the notebook's last graded cell, so nothing it does "
           "can change a grade]\n")


def tail_start(nb) -> int:
    """The index of the first cell after the notebook's last graded cell
    (an answer or a test cell, by nbgrader's metadata); 0 when none is graded,
    so a notebook without graded cells runs nothing."""
    graded = [i for i, cell in enumerate(nb.cells)
              if cell.get("metadata", {}).get("nbgrader", {}).get("grade")
              or cell.get("metadata", {}).get("nbgrader", {}).get("solution")]
    return graded[-1] + 1 if graded else 0


def _error_kept_short(out):
    """An error output with its message and traceback shortened: the verdict
    needs the error, not megabytes of it."""
    out["evalue"] = str(out.get("evalue", ""))[:2000]
    out["traceback"] = [t[:2000] for t in out.get("traceback", [])[-5:]]
    return out


class CappedExecute(Execute):
    max_output_bytes = Integer(64 * 1024, help="bytes of output kept per cell while it runs").tag(config=True)
    timing_file = Unicode("", help="where the timing marks are written (none if empty)").tag(config=True)
    # nbgrader stops the whole notebook when a cell's output never ends; a
    # cell whose output was refused (BoundedKernelClient) loses its output, not
    # the notebook: its error, if any, comes from the execute reply.
    raise_on_iopub_timeout = Bool(False).tag(config=True)
    skip_tail = Bool(False, help="leave out the code cells after the last graded cell").tag(config=True)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._kept_bytes: dict[int, int] = {}  # cell index -> bytes of output kept so far
        self._first_cell: float | None = None

    def preprocess(self, nb, resources=None, km=None):
        """Writes to timing_file when execution began, when the kernel
        answered (its first cell starts) and when the last cell ended, as
        epoch seconds, for grade's per-stage timing."""
        began = time.time()
        self._tail_from = tail_start(nb) if self.skip_tail else len(nb.cells)
        try:
            return super().preprocess(nb, resources, km)
        finally:
            if self.timing_file:
                with open(self.timing_file, "w") as fh:
                    json.dump({"execute_start": began, "first_cell": self._first_cell or began,
                               "execute_end": time.time()}, fh)

    def setup_kernel(self, **kwargs):
        kwargs.update(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return super().setup_kernel(**kwargs)

    def create_kernel_manager(self):
        km = super().create_kernel_manager()
        km.client_factory = BoundedKernelClient
        return km

    def preprocess_cell(self, cell, resources, index):
        if self._first_cell is None:
            self._first_cell = time.time()
        if index >= getattr(self, "_tail_from", len(self.nb.cells)) and cell.cell_type == "code":
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=NOT_RUN)]
            cell.execution_count = None
            return cell, resources
        cell, resources = super().preprocess_cell(cell, resources, index)
        if isinstance(self.kc, BoundedKernelClient) and self.kc.refused_message():
            cell.outputs.append(nbformat.v4.new_output("stream", name="stdout", text=REFUSED.format(
                mb=MAX_KERNEL_MESSAGE_BYTES // 2**20)))
            self.kc.reconnect_iopub()
        return cell, resources

    def output(self, outs, msg, display_id, cell_index):
        if msg["msg_type"] == "error":
            out = super().output(outs, msg, display_id, cell_index)
            return _error_kept_short(out) if out is not None else None
        content = msg.get("content", {})
        size = len(content["text"]) if msg["msg_type"] == "stream" else len(json.dumps(content.get("data", {})))
        kept = self._kept_bytes.get(cell_index, 0)
        self._kept_bytes = {cell_index: kept}  # one cell runs at a time: forget the others
        if kept + size <= self.max_output_bytes:
            self._kept_bytes[cell_index] = kept + size
            return super().output(outs, msg, display_id, cell_index)
        if kept <= self.max_output_bytes:  # the first message past the cap: say so, once
            self._kept_bytes[cell_index] = self.max_output_bytes + 1
            note = nbformat.v4.new_output("stream", name="stdout", text=DROPPED.format(cap=self.max_output_bytes))
            outs.append(note)
            return note
        return None


class StderrIsNotFailure(NbGraderPreprocessor):
    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code":
            for out in cell.get("outputs", []):
                if out.get("output_type") == "stream" and out.get("name") == "stderr":
                    out["name"] = "stdout"
                    out["text"] = "".join(f"[stderr] {line}" for line in out["text"].splitlines(True))
        return cell, resources


class CapOutputBytes(NbGraderPreprocessor):
    max_bytes = Integer(64 * 1024, help="most bytes of output kept per cell").tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        budget, kept = self.max_bytes, []
        for out in cell.get("outputs", []):
            size = len(json.dumps(out))
            if size <= budget:
                kept.append(out)
                budget -= size
                continue
            if out.get("output_type") == "stream":  # keep the head of the text
                out["text"] = out["text"][: max(budget - 200, 0)] + TRUNCATED.format(n=size - budget, cap=self.max_bytes)
                kept.append(out)
            elif out.get("output_type") == "error":  # the verdict needs the error: keep its name and a short message
                kept.append(_error_kept_short(out))
            else:
                kept.append({"output_type": "stream", "name": "stdout",
                             "text": TRUNCATED.format(n=size - budget, cap=self.max_bytes)})
            budget = 0
        cell["outputs"] = kept
        return cell, resources


def autograde_preprocessors() -> list[str]:
    """nbgrader's own list with ours inserted right after Execute."""
    return ["autograder.grading.preprocessors.CappedExecute", "autograder.grading.preprocessors.StderrIsNotFailure",
            "autograder.grading.preprocessors.CapOutputBytes", "nbgrader.preprocessors.IgnorePattern",
            "nbconvert.preprocessors.ClearMetadataPreprocessor", "nbgrader.preprocessors.LimitOutput",
            "nbgrader.preprocessors.SaveAutoGrades", "nbgrader.preprocessors.AssignLatePenalties",
            "nbgrader.preprocessors.CheckCellMetadata"]
