"""Task backends: an in-process thread pool for the embedded setup (O3).

Django's ImmediateBackend runs a task on the caller's thread — on the reply path. This
backend runs it on a small pool of worker threads in the server process instead, after
the enqueuing transaction commits (so the worker sees the rows it was handed), and closes
the worker's database connections afterwards. Results live only in memory: a task killed
with the process is lost, and the run it carried is marked failed by the idle check
(`fail_stale_runs`). At scale, use the `db` backend with a worker process (issue 9).
"""

import logging
from concurrent.futures import ThreadPoolExecutor
from traceback import format_exception

from django.db import close_old_connections, connections, transaction
from django.tasks import TaskResult, TaskResultStatus
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import TaskContext, TaskError
from django.tasks.exceptions import TaskResultDoesNotExist
from django.tasks.signals import task_enqueued, task_finished, task_started
from django.utils import timezone
from django.utils.crypto import get_random_string
from django.utils.json import normalize_json

log = logging.getLogger(__name__)


class ThreadPoolBackend(BaseTaskBackend):
    """Run tasks on worker threads of this process, off the caller's path."""

    supports_get_result = True

    def __init__(self, alias, params):
        super().__init__(alias, params)
        self.worker_id = get_random_string(32)
        self._pool = ThreadPoolExecutor(
            max_workers=int(self.options.get("MAX_WORKERS", 2)), thread_name_prefix="previously-task"
        )
        self._results: dict[str, TaskResult] = {}

    def enqueue(self, task, args, kwargs):
        self.validate_task(task)
        result = TaskResult(
            task=task,
            id=get_random_string(32),
            status=TaskResultStatus.READY,
            enqueued_at=timezone.now(),
            started_at=None,
            last_attempted_at=None,
            finished_at=None,
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        self._results[result.id] = result
        task_enqueued.send(type(self), task_result=result)
        # Outside a transaction this submits at once; inside one, at its commit.
        transaction.on_commit(lambda: self._pool.submit(self._execute, result))
        return result

    def get_result(self, result_id):
        try:
            return self._results[result_id]
        except KeyError:
            raise TaskResultDoesNotExist(result_id) from None

    def _execute(self, result: TaskResult) -> None:
        close_old_connections()
        started = timezone.now()
        object.__setattr__(result, "status", TaskResultStatus.RUNNING)
        object.__setattr__(result, "started_at", started)
        object.__setattr__(result, "last_attempted_at", started)
        result.worker_ids.append(self.worker_id)
        task_started.send(type(self), task_result=result)
        task = result.task
        try:
            if task.takes_context:
                value = task.call(TaskContext(task_result=result), *result.args, **result.kwargs)
            else:
                value = task.call(*result.args, **result.kwargs)
            object.__setattr__(result, "_return_value", normalize_json(value))
            object.__setattr__(result, "status", TaskResultStatus.SUCCESSFUL)
        except BaseException as exc:  # noqa: BLE001 - recorded on the result, like Django's backends
            log.exception("task %s failed", task.name)
            result.errors.append(
                TaskError(
                    exception_class_path=f"{type(exc).__module__}.{type(exc).__qualname__}",
                    traceback="".join(format_exception(exc)),
                )
            )
            object.__setattr__(result, "status", TaskResultStatus.FAILED)
        finally:
            object.__setattr__(result, "finished_at", timezone.now())
            task_finished.send(type(self), task_result=result)
            connections.close_all()
            self._forget_old_results()

    def _forget_old_results(self, keep: int = 1000) -> None:
        # Results are kept for get_result(); a long-lived process keeps only the latest.
        if len(self._results) > keep:
            for result_id in [k for k, r in self._results.items() if r.is_finished][: len(self._results) - keep]:
                self._results.pop(result_id, None)

    def close(self) -> None:
        self._pool.shutdown(wait=False)
