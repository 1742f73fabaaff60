"""gradsync.torch.elastic: training that survives a lost rank and grows.

Horovod Elastic's shape over gradsync's supervisor (docs/ELASTIC.md):

    import gradsync.torch as gs
    gs.init()
    state = gs.elastic.TorchState(model, optimizer, epoch=0, samples=0)

    @gs.elastic.run
    def train(state):
        sampler = gs.elastic.ElasticSampler(len(dataset), seed=1)
        for state.epoch in range(state.epoch, epochs):
            for idx in sampler.batches(state.epoch, state.samples, batch):
                ...one step on dataset[idx]...
                state.samples += batch * gs.size()
                if step % 10 == 0:
                    state.commit()      # saves, then check_host_updates()
            state.samples = 0
        state.commit()

    train(state)

launched with `gradsync run --elastic MIN:MAX -- /usr/bin/python3 train.py`.

Open MPI 4.1 has no way to shrink or grow a running communicator, so a
change of world size is a coordinated restart, as with TorchElastic, Pollux
and Dorm: a rank that dies ends the job (gradsync's fault handling) and the
supervisor relaunches the survivors; hosts that join make the supervisor
send SIGUSR1, the ranks agree at the next commit, save it and exit 3, and the
supervisor relaunches larger. `run` restores the last commit on every start,
so `train` continues where the job committed, on whatever world size it now
has. What happened since the last commit is redone; commit as often as that
may cost.

The commit directory is `dir=` of the state, else $GRADSYNC_ELASTIC_DIR, else
`./gradsync-elastic`; it must be visible to rank 0 on every start (a shared
file system, or the same host).

Under the cluster manager (`gradsync submit --exec -- /usr/bin/python3
train.py`), $GRADSYNC_ELASTIC_DIR is the job's own directory, and a state
that knows the run's length reports its progress there at every commit:

    state.set_progress(epochs, len(dataset), batch=batch)

writes progress.json ({"epoch", "samples_in_epoch", "epoch_samples",
"epochs"}, from the state's `epoch` and `samples`) beside the commit, from
which the manager shows the job's progress and measures its samples per
second on each size, as it does for a `gradsync train` job
(docs/CLUSTER_MANAGER.md). With `batch` (a rank's samples a step) and a
gradsync.torch DistributedOptimizer in a TorchState, it also writes the
engine's profile (profile.json) once the engine has planned, from which the
manager predicts the job's speed on every size before it has measured it.
"""
import os
import signal
import sys

# Exit status of a job that stopped at a commit because it was asked to (the
# supervisor's cue to relaunch; `gradsync train` uses the same).
EXIT_RESIZE = 3

_stop_asked = False
_handler_installed = False


class HostsUpdatedInterrupt(Exception):
    """Raised by State.check_host_updates() (and so by commit()) on every
    rank once any rank was asked to stop (SIGUSR1): the supervisor has new
    hosts. `run` catches it and exits EXIT_RESIZE after the commit."""


def _on_usr1(signum, frame):
    global _stop_asked
    _stop_asked = True


def _install_handler():
    global _handler_installed
    if not _handler_installed:
        signal.signal(signal.SIGUSR1, _on_usr1)
        _handler_installed = True


def _gs():
    from gradsync import torch as gs  # the binding, imported when used
    return gs


class State:
    """What a commit saves and a restart restores. Subclasses say how to
    capture and apply their objects (TorchState does it for a model and an
    optimizer); extra keyword values (epoch=0, samples=0, ...) are
    attributes saved with them."""

    def __init__(self, dir=None, **extra):
        self._dir = dir or os.environ.get("GRADSYNC_ELASTIC_DIR") or "gradsync-elastic"
        self._extra = dict(extra)
        self._reset_callbacks = []
        self._progress = None  # (epochs, epoch_samples) once set_progress is called
        self._batch = None  # a rank's samples a step, when set_progress has it
        self._profile_written = False  # this launch's profile.json is written
        self.commits = 0
        self.restored = None  # the restored commit's description, or None
        for k, v in extra.items():
            setattr(self, k, v)

    # -- to override --
    def _prepare(self):
        """On every rank, before rank 0 captures the state: what must be
        done by all the ranks together."""

    def _capture(self):
        return {}

    def _apply(self, blob):
        pass

    # -- the API --
    def sync(self):
        """Collective: every rank takes rank 0's state (its objects and the
        extra values), as Horovod's state.sync(). `run` calls it on a fresh
        start (no commit to restore)."""
        gs = _gs()
        self._prepare()
        self._sync_objects()
        extra = gs.broadcast_object({k: getattr(self, k) for k in self._extra}, root_rank=0)
        for k, v in extra.items():
            setattr(self, k, v)

    def _sync_objects(self):
        """sync()'s part for the subclass's objects."""

    def register_reset_callbacks(self, callbacks):
        """Functions called (without arguments) after a restart restored a
        commit made on another world size: rescale the learning rate, rebuild
        samplers, ..."""
        self._reset_callbacks.extend(callbacks)

    def _path(self):
        return os.path.join(self._dir, "state.pt")

    def set_progress(self, epochs, epoch_samples, batch=None):
        """Declares the run's length: `epochs` epochs of `epoch_samples`
        samples. Every commit after it also writes progress.json (the
        state's `epoch`, the epoch under way from 0, and `samples`, the
        samples of it trained) for a cluster manager to read. With `batch`,
        the samples each rank trains a step, a TorchState whose optimizer
        is a gradsync.torch DistributedOptimizer also writes, once a launch
        and once the engine has planned, its profile (profile.json), from
        which the manager predicts the job's speed on sizes it has not run
        on yet."""
        if not (epochs > 0 and epoch_samples > 0):
            raise ValueError(f"set_progress: {epochs} epochs of {epoch_samples} samples "
                             "(both must be above 0)")
        if batch is not None and not (isinstance(batch, int) and batch > 0):
            raise ValueError(f"set_progress: batch {batch!r} (an integer above 0, the "
                             "samples a rank trains a step)")
        self._progress = (epochs, epoch_samples)
        self._batch = batch

    def _profile(self):
        """The profile of the training, as JSON text, or None (overridden)."""
        return None

    def _write_report(self, name, text):
        """Writes `text` to `name` in the commit directory atomically (a
        temporary file, then a rename), for a manager that reads it."""
        path = os.path.join(self._dir, name)
        tmp = path + f".tmp.{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)

    def _write_profile(self):
        text = self._profile() if self._batch else None
        if text is None:
            return
        self._write_report("profile.json", text)
        self._profile_written = True

    def _write_progress(self):
        import json
        epochs, n = self._progress
        report = {"epoch": int(getattr(self, "epoch", 0)),
                  "samples_in_epoch": int(getattr(self, "samples", 0)),
                  "epoch_samples": int(n), "epochs": epochs}
        self._write_report("progress.json", json.dumps(report))

    def save(self):
        """Rank 0 writes the state atomically (a temporary file, fsync, rename,
        fsync of the directory); every rank returns once it is on disk."""
        import torch
        gs = _gs()
        err = None
        self._prepare()
        if gs.rank() == 0:
            try:
                os.makedirs(self._dir, exist_ok=True)
                blob = {"state": self._capture(),
                        "extra": {k: getattr(self, k) for k in self._extra},
                        "size": gs.size(), "commits": self.commits + 1}
                tmp = self._path() + f".tmp.{os.getpid()}"
                with open(tmp, "wb") as f:
                    torch.save(blob, f)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, self._path())
                if self._progress:
                    self._write_progress()
                    if not self._profile_written:
                        self._write_profile()
                fd = os.open(self._dir, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as e:
                err = f"elastic commit to {self._path()}: {e}"
        err = gs.broadcast_object(err, root_rank=0)
        if err:
            raise gs.GradsyncError(err)
        self.commits += 1

    def check_host_updates(self):
        """Collective: raises HostsUpdatedInterrupt on every rank if any rank
        was asked to stop since the job started."""
        import torch
        gs = _gs()
        flag = torch.tensor([1 if _stop_asked else 0], dtype=torch.int32)
        if gs.size() > 1:
            flag = gs.allreduce(flag, op=gs.Max)
        if int(flag.item()):
            raise HostsUpdatedInterrupt("the supervisor asked for a resize")

    def commit(self):
        """Saves the state (every rank), then check_host_updates()."""
        self.save()
        self.check_host_updates()

    def restore(self):
        """Collective: loads the last commit, if there is one, on rank 0 and
        gives it to every rank; calls the reset callbacks if it was made on
        another world size. Returns whether a commit was restored."""
        import torch
        gs = _gs()
        blob, err = None, None
        if gs.rank() == 0 and os.path.exists(self._path()):
            try:
                with open(self._path(), "rb") as f:
                    blob = torch.load(f)
            except Exception as e:  # a truncated or foreign file
                err = f"elastic restore from {self._path()}: {e}"
        err = gs.broadcast_object(err, root_rank=0)
        if err:
            raise gs.GradsyncError(err)
        blob = gs.broadcast_object(blob, root_rank=0)
        if blob is None:
            # A fresh start: every rank takes rank 0's state, as Horovod's
            # elastic run does (state.sync()); ranks that initialised their
            # models with their own seeds would otherwise train apart.
            self.sync()
            return False
        self._apply(blob["state"])
        for k, v in blob["extra"].items():
            setattr(self, k, v)
        self.commits = blob["commits"]
        self.restored = {"size": blob["size"], "commits": blob["commits"]}
        if blob["size"] != gs.size():
            for cb in self._reset_callbacks:
                cb()
        return True


class TorchState(State):
    """A model's and an optimizer's state (state_dicts), with extra values."""

    def __init__(self, model=None, optimizer=None, dir=None, **extra):
        super().__init__(dir=dir, **extra)
        self.model = model
        self.optimizer = optimizer

    def _prepare(self):
        # DeAR's overlap leaves the last updates for the next forward: every
        # rank applies them (a no-op otherwise). On rank 0 alone, its wait
        # for the all-gathers met the others in the commit's broadcast: a
        # deadlock.
        if self.optimizer is not None and hasattr(self.optimizer, "finish"):
            self.optimizer.finish()

    def _sync_objects(self):
        gs = _gs()
        if self.model is not None:
            gs.broadcast_parameters(self.model.state_dict(), root_rank=0)
        if self.optimizer is not None:
            gs.broadcast_optimizer_state(self.optimizer, root_rank=0)

    def _capture(self):
        out = {}
        if self.model is not None:
            out["model"] = self.model.state_dict()
        if self.optimizer is not None:
            out["optimizer"] = self.optimizer.state_dict()
        return out

    def _profile(self):
        if not hasattr(self.optimizer, "profile"):
            return None
        gs = _gs()
        name = type(self.model).__name__ if self.model is not None else None
        return self.optimizer.profile(
            self._batch, name, f"gradsync.torch's engine profiler, rank 0 of {gs.size()}, "
            f"{self._batch} samples a rank")

    def _apply(self, blob):
        if self.model is not None and "model" in blob:
            self.model.load_state_dict(blob["model"])
        if self.optimizer is not None and "optimizer" in blob:
            self.optimizer.load_state_dict(blob["optimizer"])


class ElasticSampler:
    """Each epoch's seeded permutation of [0, n), the same on every rank,
    consumed by position: a step takes the next global batch (size x batch
    samples), this rank every size-th of them. Resumed at a commit's position
    on another world size it continues with the next unused sample, so an
    epoch uses each sample once (as `gradsync train` does)."""

    def __init__(self, n, seed=0, shuffle=True):
        self.n, self.seed, self.shuffle = n, seed, shuffle

    def permutation(self, epoch):
        import torch
        if not self.shuffle:
            return list(range(self.n))
        g = torch.Generator()
        g.manual_seed(self.seed * 1000003 + epoch)
        return torch.randperm(self.n, generator=g).tolist()

    def batches(self, epoch, start, batch):
        """This rank's batches of `epoch` from position `start`, as lists of
        indices, while a whole global batch is left."""
        gs = _gs()
        size, rank = gs.size(), gs.rank()
        perm = self.permutation(epoch)
        g = size * batch
        pos = start
        while pos + g <= self.n:
            yield [perm[pos + j * size + rank] for j in range(batch)]
            pos += g


def run(func):
    """Decorator: restores the last commit, then calls func(state, ...). If
    the supervisor asks for a resize, func's commit raises
    HostsUpdatedInterrupt: the process exits EXIT_RESIZE after it (the state
    is on disk), and the supervisor relaunches on the new world."""
    def wrapper(state, *args, **kwargs):
        _install_handler()
        state.restore()
        try:
            return func(state, *args, **kwargs)
        except HostsUpdatedInterrupt:
            gs = _gs()
            if gs.rank() == 0:
                print(f"gradsync elastic: stopped at commit {state.commits} for a resize",
                      flush=True)
            gs.shutdown()
            sys.exit(EXIT_RESIZE)
    wrapper.__name__ = getattr(func, "__name__", "run")
    wrapper.__doc__ = getattr(func, "__doc__", None)
    return wrapper
