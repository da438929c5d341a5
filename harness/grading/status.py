"""Typed test and instance statuses (never bare strings in the grading logic)."""

from __future__ import annotations

import enum


class TestStatus(str, enum.Enum):
    """The outcome of one test id as reported by the test runner."""

    __test__ = False  # not a pytest test class despite the name

    PASSED = "PASSED"
    FAILED = "FAILED"
    ERROR = "ERROR"
    SKIPPED = "SKIPPED"
    XFAIL = "XFAIL"

    @classmethod
    def worst(cls, a: "TestStatus", b: "TestStatus") -> "TestStatus":
        """Combine two reports of one id (e.g. a test that passed but errored in teardown)."""
        order = [cls.PASSED, cls.XFAIL, cls.SKIPPED, cls.FAILED, cls.ERROR]
        return a if order.index(a) >= order.index(b) else b


class InstanceStatus(str, enum.Enum):
    """The verdict of one instance. Only FULL counts as resolved."""

    FULL = "FULL"
    PARTIAL = "PARTIAL"
    NO = "NO"
    INVALID = "INVALID"


class ErrorReason(str, enum.Enum):
    """Why an instance is INVALID (or otherwise not valid evidence)."""

    PATCH_REJECTED = "patch_rejected"
    PATCH_APPLY_FAILED = "patch_apply_failed"
    TEST_PATCH_APPLY_FAILED = "test_patch_apply_failed"
    TIMEOUT = "timeout"
    SUITE_DID_NOT_RUN = "suite_did_not_run"
    #: graded tests were never collected: a test module failed to import (or collect)
    COLLECTION_ERROR = "collection_error"
    CONTAINER_DIED = "container_died"
    OUTPUT_LIMIT_EXCEEDED = "output_limit_exceeded"
    AMBIGUOUS_RESULTS = "ambiguous_results"
    RESULTS_OVER_LIMIT = "results_over_limit"
    TAMPERED = "tampered"
    #: a canary did what only a forger's run does, but no reference run proved it can
    #: fail (harness/integrity/canaries/judge.py): grade with --control to decide
    CANARY_UNPROVEN = "canary_unproven"
    MALFORMED_INSTANCE = "malformed_instance"
    ENVIRONMENT_BUILD_FAILED = "environment_build_failed"
    SERVICE_UNAVAILABLE = "service_unavailable"
    REPOSITORY_UNAVAILABLE = "repository_unavailable"
    HARNESS_ERROR = "harness_error"
    REBUILD_FAILED = "rebuild_failed"
    #: the task ran past the executor's deadline (--task-timeout): killed with its container
    DEADLINE_EXCEEDED = "deadline_exceeded"
    #: the Docker engine stopped answering (locally or on a cluster node)
    ENGINE_LOST = "engine_lost"
    #: the cluster node running the task died more often than the re-queue budget allows
    NODE_LOST = "node_lost"

    @property
    def origin(self) -> str:
        """Who is to blame by default: 'model', 'instance' or 'harness' (evidence can move
        a 'model' default elsewhere: harness/grading/origins.py)."""
        return _ORIGIN[self]


_ORIGIN = {
    ErrorReason.PATCH_REJECTED: "model",
    ErrorReason.PATCH_APPLY_FAILED: "model",
    ErrorReason.TIMEOUT: "model",
    ErrorReason.OUTPUT_LIMIT_EXCEEDED: "model",
    ErrorReason.AMBIGUOUS_RESULTS: "model",
    ErrorReason.RESULTS_OVER_LIMIT: "model",
    ErrorReason.TAMPERED: "model",
    ErrorReason.CANARY_UNPROVEN: "harness",
    ErrorReason.SUITE_DID_NOT_RUN: "model",
    ErrorReason.COLLECTION_ERROR: "model",
    ErrorReason.CONTAINER_DIED: "harness",
    ErrorReason.TEST_PATCH_APPLY_FAILED: "instance",
    ErrorReason.MALFORMED_INSTANCE: "instance",
    ErrorReason.ENVIRONMENT_BUILD_FAILED: "harness",
    ErrorReason.SERVICE_UNAVAILABLE: "harness",
    ErrorReason.REPOSITORY_UNAVAILABLE: "harness",
    ErrorReason.HARNESS_ERROR: "harness",
    ErrorReason.REBUILD_FAILED: "model",
    ErrorReason.DEADLINE_EXCEEDED: "harness",
    ErrorReason.ENGINE_LOST: "harness",
    ErrorReason.NODE_LOST: "harness",
}
