"""One spec, the same bytes whichever executor runs it: threads in one process, or worker processes (real spawned
processes, each with its own engine and graph). Worker deaths: a kill -9 mid-job re-runs the dead worker's batch
(nothing lost, nothing written twice); workers that keep dying fail the job with worker_lost, never a hang."""
import json
import os
import pickle
import signal
import threading
import time

import pytest

from augd.defaults import ExecutorKind
from augd.engine import Engine
from augd.errors import FailureReason, JobFailed
from augd.job import JobOptions, JobWatch, run_job
from augd.job.executors import traits
from augd.job.workers.pool import ProcessPool
from augd.schema import parse_pipeline
from tests.jobfiles import make_job, pipeline_yaml, records

LAYOUT = {**{f"train/{c}/{c}{i}.{'png' if i % 3 == 0 else 'jpg'}": "png" if i % 3 == 0 else "jpeg"
             for c in ("cat", "dog") for i in range(9)},
          **{f"validation/{c}/v{c}{i}.jpg": "jpeg" for c in ("cat", "dog") for i in range(3)},
          "train/cat/broken.jpg": "truncated"}
#: manifest blocks that hold the job's result (timing, creation time and the graph block say how it ran)
RESULT_KEYS = ("inputs", "classes", "unlabeled", "splits", "records", "shards", "bytes", "annotations", "pipeline")


def spec():
    return parse_pipeline(pipeline_yaml(shards=2, variants=2), "t.yaml")


def output(out_dir):
    files = sorted(f for f in os.listdir(out_dir) if f != "manifest.json")
    with open(os.path.join(out_dir, "manifest.json")) as fh:
        manifest = json.load(fh)
    return {f: open(os.path.join(out_dir, f), "rb").read() for f in files}, manifest


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    root = tmp_path_factory.mktemp("in") / "pets"
    make_job(root, LAYOUT)
    return str(root)


@pytest.fixture(scope="module")
def reference(job, tmp_path_factory):
    res = run_job(job, spec(), str(tmp_path_factory.mktemp("ref")), JobOptions(workers=2, executor="threads"))
    return output(res.out_dir)


@pytest.fixture(scope="module")
def pool():
    with ProcessPool(2, Engine().options) as p:
        yield p


@pytest.mark.parametrize("workers", [1, 2])
def test_worker_processes_write_the_bytes_threads_write(job, reference, tmp_path, workers):
    res = run_job(job, spec(), str(tmp_path), JobOptions(workers=workers, executor="processes"))
    files, manifest = output(res.out_dir)
    ref_files, ref_manifest = reference
    assert files == ref_files
    assert {k: manifest[k] for k in RESULT_KEYS if k in manifest} == \
           {k: ref_manifest[k] for k in RESULT_KEYS if k in ref_manifest}
    assert manifest["inputs"]["rejected"] == 1 and manifest["inputs"]["rejected_files"][0]["reason"] == "undecodable"
    graph = manifest["graph"]
    assert graph["executor"] == "processes" and ref_manifest["graph"]["executor"] == "threads"
    ran = [w for w in graph["workers"] if w["images"]]
    assert 1 <= len(ran) <= workers and all(w["builds"] == 1 and w["traces"] == 1 for w in ran)  # one each
    assert graph["builds"] == len(graph["workers"]) and sum(w["images"] for w in ran) == len(LAYOUT)


def test_a_warm_pool_runs_job_after_job_with_the_same_workers(job, reference, tmp_path, pool):
    pids = sorted(pool.pids())
    for k in range(2):
        res = run_job(job, spec(), str(tmp_path / str(k)), JobOptions(workers=2), pool=pool)  # auto: warm pool
        files, manifest = output(res.out_dir)
        assert files == reference[0] and manifest["graph"]["executor"] == "processes"
        assert {w["pid"] for w in manifest["graph"]["workers"]} <= set(pids)
    assert sorted(pool.pids()) == pids and pool.restarts == 0  # TensorFlow imported once per worker, not per job


def test_a_worker_keeps_its_pipelines_graph_for_the_next_job_and_builds_another_pipelines_own(job, tmp_path):
    """A warm worker keeps the last job's graph: the next job of the same pipeline builds and traces nothing
    (the daemon runs one pipeline job after job; a build costs more than a small job's images) and writes the same
    bytes; a job of another pipeline (here: another seed) builds its own, and so does the first one after it.
    One worker, so every job runs on it."""
    a, b = spec().with_seed(101), spec().with_seed(102)
    with ProcessPool(1, Engine().options) as one:
        def ran(s, name):
            res = run_job(job, s, str(tmp_path / name), JobOptions(workers=1, executor="processes"), pool=one)
            return [(w["builds"], w["traces"]) for w in res.report.graph.workers], output(res.out_dir)[0]

        runs = [ran(s, name) for s, name in ((a, "a1"), (a, "a2"), (b, "b"), (a, "a3"))]
    assert [graph for graph, _ in runs] == [[(1, 1)], [(0, 0)], [(1, 1)], [(1, 1)]]
    assert runs[0][1] == runs[1][1] == runs[3][1] != runs[2][1]


def test_a_worker_killed_mid_job_is_replaced_and_nothing_is_lost_or_doubled(job, reference, tmp_path):
    killed = []

    def kill_one(outcome):  # after the first image is written, kill -9 a worker that holds a batch
        if killed:
            return
        busy = [w.process.pid for w in p._workers if w.tasks] or p.pids()
        os.kill(busy[0], signal.SIGKILL)
        killed.append(busy[0])

    with ProcessPool(2, Engine().options) as p:
        res = run_job(job, spec(), str(tmp_path), JobOptions(workers=2, executor="processes"),
                      JobWatch(on_image=kill_one), pool=p)
        assert p.restarts >= 1 and killed[0] not in p.pids()
    files, manifest = output(res.out_dir)
    assert files == reference[0]  # every record, once, in its place
    assert len(records(res.out_dir)) == manifest["records"]["written"] == reference[1]["records"]["written"]


def test_workers_that_keep_dying_fail_the_job_with_worker_lost_not_a_hang(job, tmp_path):
    stop = threading.Event()

    def killer(p):  # kill every worker of the pool, again and again, until the job gives up
        while not stop.is_set():
            for pid in p.pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, TypeError):
                    pass
            time.sleep(0.05)

    with ProcessPool(2, Engine().options) as p:
        t = threading.Thread(target=killer, args=(p,), daemon=True)
        t.start()
        try:
            with pytest.raises(JobFailed) as err:   # a hang would fail this test at pytest's timeout
                run_job(job, spec(), str(tmp_path), JobOptions(workers=2, executor="processes"), pool=p)
        finally:
            stop.set()
            t.join()
    assert err.value.reason is FailureReason.WORKER_LOST
    assert "worker processes died" in str(err.value) and "signal 9" in str(err.value)
    assert os.listdir(tmp_path) == []  # nothing committed, no temp folder left


def test_the_daemon_keeps_its_workers_across_jobs_and_replaces_one_killed(tmp_path):
    """`augd serve` with executor: processes: its worker processes run job after job (each builds the
    pipeline's graph once); a worker killed with kill -9 between jobs is replaced and the next job succeeds; SIGTERM leaves no
    process behind (no_leaked_children)."""
    from tests.daemon_harness import Daemon, children_of, drop_job, manifest, wait_for, write_config
    d = Daemon(write_config(tmp_path, workers=2, executor="processes")).start()
    try:
        d.wait_ready()
        started = wait_for(lambda: d.events("worker processes (pids"), what="the workers started")[0]
        workers = {int(p) for p in started.split("(pids ", 1)[1].split(")", 1)[0].split()}
        assert len(workers) == 2 and workers <= children_of(d.proc.pid)
        pids, built = [], set()
        for k in range(3):
            drop_job(d.inbox, f"j{k}", n=6, seed=k)
            d.wait_done(f"j{k}", timeout=120)
            graph = manifest(d.out, f"j{k}")["graph"]
            assert graph["executor"] == "processes"
            # each worker builds the pipeline's graph once and keeps it (the replacement of the killed one too)
            assert all(w["builds"] == (0 if w["pid"] in built else 1) for w in graph["workers"]), graph
            built |= {w["pid"] for w in graph["workers"]}
            pids.append({w["pid"] for w in graph["workers"]})
            if k == 0:
                assert pids[0] <= workers
                victim = sorted(pids[0])[0]
                os.kill(victim, signal.SIGKILL)
                wait_for(lambda: f"worker process {victim} died (killed by signal 9)" in d.log(),
                         what="the killed worker replaced", on_fail=d.log_tail)
        assert victim not in pids[1] | pids[2]
    finally:
        code = d.stop()
    assert code == 0, d.log_tail()


@pytest.mark.parametrize("executor", [None, "beam"])
def test_the_daemon_sends_jobs_from_a_size_on_to_beam(tmp_path, executor):
    """beam: {min_files: 5}, alone or under `executor: beam`: a job of 6 images runs on Apache Beam (here its
    DirectRunner, in the daemon's process), a job of 2 on this host (under beam: as auto, here threads with one
    worker); both commit, and the metrics count both."""
    pytest.importorskip("apache_beam")
    from tests.daemon_harness import Daemon, drop_job, manifest, write_config
    # under executor: beam, Beam's options come from executor_options (the general place), else the beam: block
    extra = {"executor": executor, "executor_options": {"beam": ["--direct_num_workers=1"]}} if executor else {}
    d = Daemon(write_config(tmp_path, beam={"min_files": 5, "options": []}, **extra)).start()
    try:
        d.wait_ready()
        drop_job(d.inbox, "big", n=6, seed=1)
        drop_job(d.inbox, "small", n=2, seed=2)
        d.wait_done("big", timeout=180)
        d.wait_done("small", timeout=120)
        assert manifest(d.out, "big")["graph"]["executor"] == "beam"
        assert manifest(d.out, "small")["graph"]["executor"] == "threads"
        assert f"job big goes to beam ({'--direct_num_workers=1' if executor else 'its default options'})" in d.log()
        _, body, _ = d.get("/metrics")
        assert 'augd_images_total{result="written"} 8.0' in body, body
    finally:
        code = d.stop()
    assert code == 0, d.log_tail()


def test_every_executor_kind_is_a_module_that_declares_its_traits_and_opens_an_executor():
    """ExecutorKind is the one list of names; each (but auto) is augd/job/executors/<name>.py with TRAITS and
    open_executor, readable without the executor's extra; a module of the package that declares TRAITS is an
    executor with its name, so neither comes without the other."""
    import importlib
    import pkgutil

    import augd.job.executors as executors
    from augd.defaults import ExecutorKind
    from augd.job.executors import Traits, traits
    names = {k.value for k in ExecutorKind} - {"auto"}

    def declares(name: str) -> bool:
        try:
            return hasattr(importlib.import_module(f"augd.job.executors.{name}"), "TRAITS")
        except ImportError:   # a helper that needs an extra (beam_pipeline without Beam): no executor of its own
            return False
    declared = {m.name for m in pkgutil.iter_modules(executors.__path__) if declares(m.name)}
    assert declared == names
    for name in names:
        module = importlib.import_module(f"augd.job.executors.{name}")
        assert callable(module.open_executor) and traits(name) is module.TRAITS and isinstance(traits(name), Traits)
        if traits(name).needs:
            assert traits(name).needs[1] in _extras(), f"{name} needs the extra {traits(name).needs[1]!r}"


def _extras() -> set:
    import tomllib
    with open(os.path.join(os.path.dirname(__file__), "..", "pyproject.toml"), "rb") as fh:
        return set(tomllib.load(fh)["project"]["optional-dependencies"])


def test_each_worker_gets_its_share_of_the_cores_for_tensorflow():
    """N worker processes each running TensorFlow's default pools (one thread per core) oversubscribe the host;
    a worker gets cores // N intra- and inter-op threads unless the options set them."""
    from augd.engine import EngineOptions
    from augd.host import usable_cpus
    with ProcessPool(2, EngineOptions()) as p:
        assert p._worker_options.tf_threads == max(1, usable_cpus() // 2)
    with ProcessPool(2, EngineOptions(tf_threads=3)) as p:
        assert p._worker_options.tf_threads == 3


def test_workers_that_cannot_start_fail_the_job_and_leave_the_pool_unusable(job, tmp_path):
    """Workers that die before they are up (here: device gpu on a host without one) are not respawned forever:
    the third start failure fails the job with worker_lost, and the pool says it is unusable (the daemon then
    starts another)."""
    from augd.engine import EngineOptions
    if Engine().device.kind == "GPU":
        pytest.skip("needs a host without a GPU")
    with ProcessPool(2, EngineOptions(device="gpu")) as p:
        with pytest.raises(JobFailed) as err:
            run_job(job, spec(), str(tmp_path), JobOptions(workers=2, executor="processes"), pool=p)
        assert not p.usable
    assert err.value.reason is FailureReason.WORKER_LOST and "died while starting" in str(err.value)
    assert os.listdir(tmp_path) == []


def test_closing_a_pool_with_busy_workers_does_not_wait_for_them(job):
    """A job that fails or is cancelled closes its pool while workers still run batches: their results are not
    wanted, the busy workers are killed at once, and every future is settled."""
    from augd.io import scan_job
    images = list(scan_job(job).images)
    with ProcessPool(2, Engine().options) as p:
        ctx = p.start_job(spec(), None)
        warm = p.submit(ctx, images[:1], [0, 1, 2])
        warm.result(timeout=120)            # the workers are up
        futures = [p.submit(ctx, [img], [0, 1, 2]) for img in images * 4]
        while not any(w.tasks for w in p._workers):
            time.sleep(0.01)
        busy = [w.process for w in p._workers if w.tasks]
    assert all(f.done() for f in futures)
    assert busy and all(proc.exitcode == -signal.SIGKILL for proc in busy)  # killed, not waited for


def test_a_detection_job_on_worker_processes_writes_the_bytes_threads_write(tmp_path):
    """A VOC job with boxes, semantic masks and a negative: its annotations reach every worker with the job's
    first batch, and the records (boxes, masks) are byte-identical to the threads executor's, box-aware ops (holes
    and a solarize inside the boxes the crop and rotation moved) included."""
    from tests.annotated import Img, voc_job
    red, blue = (230, 30, 30), (30, 30, 230)
    images = [Img(f"im{i}.{'jpg' if i % 2 else 'png'}", 48 + 2 * i, 64,
                  [("cat", (4 + i, 6, 24 + i, 30), red), ("dog", (34, 10, 58, 40), blue)][:1 + i % 2],
                  split="train" if i < 5 else "val") for i in range(7)]
    images.append(Img("empty.png", 40, 40, split="train"))
    voc_job(str(tmp_path / "job"), images, masks="P", annotate={i.name for i in images} - {"empty.png"})
    det = parse_pipeline("name: det\nseed: 5\nvariants: 2\noutput: {format: png, shards: 2}\nops:\n"
                         "  - random_crop: {size: [40, 48], area: [0.5, 1.0]}\n  - random_rotation: {degrees: 10}\n"
                         "  - box_cutout: {boxes: each, size: 8, box_p: 0.7}\n"
                         "  - in_boxes: {op: solarize, value: 100, box_p: 0.5}\n",
                         "det.yaml")
    outs = {}
    for executor in ("threads", "processes"):
        res = run_job(str(tmp_path / "job"), det, str(tmp_path / executor), JobOptions(workers=2, executor=executor))
        outs[executor] = output(res.out_dir)
    (files_t, m_t), (files_p, m_p) = outs["threads"], outs["processes"]
    assert files_t == files_p and "label_map.pbtxt" in files_p
    assert m_p["annotations"] == m_t["annotations"] and m_p["graph"]["executor"] == "processes"
    assert m_p["inputs"]["written"] == len(images)


def test_workers_default_to_the_cpus_the_process_may_use_not_the_machines():
    """A container limited to 2 CPUs on a 64-core node must not start 64 TensorFlow workers: the default worker
    count follows the CPU affinity (taskset, here) and a cgroup CPU quota (parsed here from its two formats)."""
    import subprocess
    import sys

    from augd.host import parse_quota
    assert parse_quota(v2="max 100000") is None and parse_quota(v2="150000 100000") == 1.5
    assert parse_quota(v1_quota="-1", v1_period="100000") is None
    assert parse_quota(v1_quota="50000", v1_period="100000") == 0.5 and parse_quota(v2="garbage") is None
    import shutil
    if shutil.which("taskset") is None:
        pytest.skip("no taskset")
    code = "from augd.host import usable_cpus; print(usable_cpus())"
    res = subprocess.run(["taskset", "-c", "0", sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(__file__))})
    assert res.stdout.strip() == "1"


def _modules_loaded(names):
    import sys
    return [n in sys.modules for n in names]


@pytest.mark.skipif("TF_USE_LEGACY_KERAS" in os.environ, reason="the worker leaves TF_USE_LEGACY_KERAS as set")
def test_a_worker_runs_its_graph_without_loading_keras(job, reference, pool, tmp_path):
    """TensorFlow's import loads Keras' optimizers eagerly unless told otherwise; a worker never uses Keras, so it
    is spared that (augd.tfenv.without_keras), Keras 3 and tf_keras alike (CI installs tf_keras
    for Model Garden's decoder), and still writes the bytes threads write."""
    res = run_job(job, spec(), str(tmp_path), JobOptions(workers=2, executor="processes"), pool=pool)
    assert output(res.out_dir)[0] == reference[0]
    loaded = [pickle.loads(f.result(timeout=300)) for f in pool.map(_modules_loaded, [["keras", "tf_keras", "tensorflow"]] * 4)]
    assert loaded == [[False, False, True]] * 4


def test_augd_s_own_tensorflow_import_loads_no_keras_and_freezes_its_objects():
    """What workers, `augd run` and `augd serve` import TensorFlow with (augd.tfenv.import_tensorflow): no Keras
    3, no tf_keras, the environment as it was, the collector on again and TensorFlow's objects out of its reach;
    a user's own TF_USE_LEGACY_KERAS is theirs (TensorFlow then loads the Keras it names)."""
    code = ("import gc, os, sys; from augd.tfenv import import_tensorflow; tf = import_tensorflow(); "
            "print(['keras' in sys.modules, 'tf_keras' in sys.modules, os.environ.get('TF_USE_LEGACY_KERAS'), "
            "gc.isenabled(), gc.get_freeze_count() > 100000, int(tf.constant(2)) == 2])")
    assert _fresh_python(code, "TF_USE_LEGACY_KERAS") == "[False, False, None, True, True, True]"
    assert _fresh_python(code, "TF_USE_LEGACY_KERAS", "0") == "[True, False, '0', True, True, True]"


def _fresh_python(code: str, variable: str, value: str | None = None) -> str:
    """The last line `python -c code` prints in a new process, this repository importable, with `variable` unset
    (None) or set to `value`."""
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != variable}
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(__file__))
    if value is not None:
        env[variable] = value
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env=env).stdout.strip().splitlines()[-1]


def blas_setting(_chunk):
    """What a pool's worker runs (ProcessPool.map): its OpenBLAS thread setting."""
    return os.environ.get("OPENBLAS_NUM_THREADS")


def test_augd_s_own_processes_load_numpy_with_one_openblas_thread_unless_the_user_says(monkeypatch):
    """The `augd` command and a pool's workers (augd.tfenv.prepare_own_process): OpenBLAS starts one thread, not a
    spinning one per core; a user's own OPENBLAS_NUM_THREADS is theirs. The thread count is read where NumPy's BLAS
    is OpenBLAS on Linux (PyPI's wheels), else the setting alone. (A worker spawned from a main module that loads
    NumPy has it loaded first: docs/design.md says so.)"""
    code = ("import json, os; from augd.cli import main; main(['validate', 'seed-classifier']); import numpy; "
            "blas = numpy.show_config(mode='dicts')['Build Dependencies']['blas']['name']; "
            "tasks = len(os.listdir('/proc/self/task')) if os.path.isdir('/proc/self/task') else None; "
            "print(json.dumps([os.environ.get('OPENBLAS_NUM_THREADS'), tasks if 'openblas' in blas else None]))")
    said, tasks = json.loads(_fresh_python(code, "OPENBLAS_NUM_THREADS"))
    assert said == "1" and tasks in (1, None)
    said, tasks = json.loads(_fresh_python(code, "OPENBLAS_NUM_THREADS", "2"))
    assert said == "2" and tasks in (min(2, len(os.sched_getaffinity(0))), None)   # OpenBLAS caps it at the cores
    # a pool a library user's process starts, whatever that process set
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    with ProcessPool(1, Engine().options) as pool:
        assert pickle.loads(pool.map(blas_setting, [None])[0].result(timeout=300)) == "1"


@pytest.mark.parametrize("kind", [k.value for k in ExecutorKind if k.value not in ("auto", "threads")])
def test_every_executor_writes_the_bytes_threads_write(job, reference, tmp_path, kind):
    """Driven by the registry: an executor added to ExecutorKind is run here, on the job threads ran, and must
    write the same shards and the same result blocks, saying in the manifest that it ran them."""
    why = traits(kind).missing(kind)
    if why:
        pytest.skip(why)
    res = run_job(job, spec(), str(tmp_path), JobOptions(workers=2, executor=kind))
    files, manifest = output(res.out_dir)
    assert files == reference[0]
    assert {k: manifest[k] for k in RESULT_KEYS if k in manifest} == \
           {k: reference[1][k] for k in RESULT_KEYS if k in reference[1]}
    graph = manifest["graph"]
    assert graph["executor"] == kind and graph["choice"] == {"requested": kind, "executor": kind, "workers": 2,
                                                             "why": "asked for", "estimated_seconds": {}}
    if traits(kind).engine_here:   # its images ran here, on the graph this process compiled
        assert all(w["pid"] == os.getpid() for w in graph["workers"])
    elif kind != "beam":   # Beam's runner decides where images run; the others name the process of each
        assert sum(w["images"] for w in graph["workers"]) == len(LAYOUT)
        assert all(w["pid"] != os.getpid() for w in graph["workers"])   # the images ran in worker processes


@pytest.fixture()
def dask_cluster():
    """A running dask.distributed cluster of two single-threaded worker processes (its scheduler here):
    (address, the workers' pids, the cluster). The environment distributed changes for its workers is put back."""
    distributed = pytest.importorskip("distributed")
    saved = dict(os.environ)
    try:
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                      scheduler_port=0, host="127.0.0.1") as c, distributed.Client(c) as client:
            pids = set(client.run(os.getpid).values())
            yield c.scheduler_address, pids, c
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_augd_run_on_a_running_dask_cluster_uses_its_workers_and_leaves_it_as_it_was(job, reference, tmp_path,
                                                                                   dask_cluster):
    """`augd run --executor dask -- --scheduler ADDRESS`: the images run on that cluster's worker processes, the
    bytes are threads', and augd's client is gone afterwards (the cluster keeps running for its owner). Options
    the executor cannot take are a usage error before anything is written."""
    import subprocess
    import sys
    address, pids, cluster = dask_cluster
    before = len(cluster.scheduler.clients)
    def run(out, *options):
        return subprocess.run([sys.executable, "-m", "augd", "run", job, "-p", str(tmp_path / "t.yaml"), "-o",
                               str(tmp_path / out), "-q", "--workers", "2", "--executor", "dask", "--", *options],
                              capture_output=True, text=True, env=env, timeout=600)
    (tmp_path / "t.yaml").write_text(pipeline_yaml(shards=2, variants=2))
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    p = run("out", "--scheduler", address)
    assert p.returncode == 0, p.stderr[-3000:]
    files, manifest = output(str(tmp_path / "out" / "pets"))
    assert files == reference[0]
    assert {w["pid"] for w in manifest["graph"]["workers"]} <= pids
    deadline = time.monotonic() + 30
    while len(cluster.scheduler.clients) > before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(cluster.scheduler.clients) == before
    bad = run("out2", "--scheduler", address, "--bogus")
    assert bad.returncode == 2 and not (tmp_path / "out2").exists()
    assert "the dask executor's options: unknown ['--bogus']; allowed: --scheduler ADDRESS" in bad.stderr
    gone = run("out2", "--scheduler-file", str(tmp_path / "none.json"))   # distributed would wait for it for ever
    assert gone.returncode == 2 and not (tmp_path / "out2").exists()
    assert f"--scheduler-file {tmp_path / 'none.json'}: no such file" in gone.stderr


def test_a_dask_scheduler_that_is_not_there_fails_the_job_saying_so(job, tmp_path, monkeypatch):
    """No scheduler at the address: the job fails (worker_lost, naming the cluster), nothing is written, and no
    local cluster or client is left behind."""
    pytest.importorskip("distributed")
    from augd.job.executors import dask as dask_executor
    from tests.daemon_harness import free_port
    monkeypatch.setattr(dask_executor, "CONNECT_SECONDS", 2)
    port = free_port()   # nothing listens on it, and no other test's cluster takes it meanwhile
    with pytest.raises(JobFailed) as err:
        run_job(job, spec(), str(tmp_path), JobOptions(workers=2, executor="dask",
                                                       executor_args=("--scheduler", f"tcp://127.0.0.1:{port}")))
    assert err.value.reason is FailureReason.WORKER_LOST
    assert f"the dask executor cannot reach its cluster (tcp://127.0.0.1:{port}): " in str(err.value)
    assert os.listdir(tmp_path) == []


def test_the_daemon_runs_the_executor_its_config_names(tmp_path):
    """`executor: dask` in the config: the daemon runs its jobs there (not on threads because no pool exists),
    and says so in each manifest."""
    pytest.importorskip("distributed")
    from tests.daemon_harness import Daemon, drop_job, manifest, write_config
    d = Daemon(write_config(tmp_path, executor="dask", workers=2)).start()
    try:
        d.wait_ready()
        drop_job(d.inbox, "one", n=3, seed=1)
        d.wait_done("one", timeout=180)
        graph = manifest(d.out, "one")["graph"]
        assert graph["executor"] == "dask" and graph["choice"]["requested"] == "dask"
        assert sum(w["images"] for w in graph["workers"]) == 3
    finally:
        code = d.stop()
    assert code == 0, d.log_tail()
