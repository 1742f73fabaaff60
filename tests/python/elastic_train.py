"""A job of gradsync.torch.elastic for test_elastic.sh: a small linear model
on 240 samples, 2 epochs, 4 samples per rank and step, a commit every 3
steps. The state records, per epoch, every sample index trained (gathered on
every commit), so the last run can check that each epoch used every sample
of its permutation's trained prefix exactly once across restarts on other
world sizes. Modes (argv[2]): "" runs; "usr1-at:N" makes the last rank send
itself SIGUSR1 after its N-th step of this run (a supervisor's resize
request: the job must stop at the next commit with exit 3); "kill-at:N"
SIGKILLs the last rank after its N-th step.
Usage: elastic_train.py DIR [MODE]"""
import os
import signal
import sys

import torch

import gradsync.torch as gs

N, BATCH, EPOCHS, COMMIT_EVERY = 240, 4, 2, 3
directory = sys.argv[1]
mode = sys.argv[2] if len(sys.argv) > 2 else ""

gs.init()
torch.manual_seed(0)
x = torch.randn(N, 8)
y = (x[:, 0] + x[:, 1] > 0).long()
model = torch.nn.Linear(8, 2)
opt = gs.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                              named_parameters=model.named_parameters())
state = gs.elastic.TorchState(model, opt, dir=directory, epoch=0, samples=0, used={})
# progress.json at each commit, and profile.json once the engine has planned,
# for a cluster manager
state.set_progress(EPOCHS, N, batch=BATCH)
resets = []
state.register_reset_callbacks([lambda: resets.append(gs.size())])


@gs.elastic.run
def train(state):
    if state.restored and gs.rank() == 0:
        print(f"restored commit {state.restored['commits']} of {state.restored['size']} "
              f"ranks at epoch {state.epoch}, sample {state.samples}, now {gs.size()} ranks",
              flush=True)
    gs.broadcast_parameters(model.state_dict(), root_rank=0)
    sampler = gs.elastic.ElasticSampler(N, seed=3)
    steps = 0
    pending = []
    while state.epoch < EPOCHS:
        for idx in sampler.batches(state.epoch, state.samples, BATCH):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            pending += idx
            state.samples += BATCH * gs.size()
            steps += 1
            last = gs.rank() == gs.size() - 1
            if last and mode == f"usr1-at:{steps}":
                os.kill(os.getpid(), signal.SIGUSR1)
            if last and mode == f"kill-at:{steps}":
                os.kill(os.getpid(), signal.SIGKILL)
            if steps % COMMIT_EVERY == 0:
                for part in gs.allgather_object(pending):
                    state.used.setdefault(state.epoch, []).extend(part)
                pending = []
                state.commit()
        for part in gs.allgather_object(pending):
            state.used.setdefault(state.epoch, []).extend(part)
        pending = []
        state.epoch += 1
        state.samples = 0
        state.commit()
    return True


train(state)
if gs.rank() == 0:
    bad = 0
    for e in range(EPOCHS):
        used = state.used.get(e, [])
        perm = gs.elastic.ElasticSampler(N, seed=3).permutation(e)
        once = len(used) == len(set(used)) and sorted(used) == sorted(perm[:len(used)])
        if not once or len(used) < N - 4 * BATCH:
            print(f"FAIL epoch {e}: {len(used)} samples, {len(set(used))} distinct, "
                  f"not the permutation's first ones once")
            bad = 1
        else:
            print(f"ELASTIC OK epoch {e}: {len(used)} of {N} samples, each once")
    print(f"reset callbacks ran for sizes {resets}")
    sys.exit(bad)
