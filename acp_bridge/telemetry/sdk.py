"""The adapter to the OpenTelemetry SDK: `SpanRecord`s and observations out over OTLP.

Owns: the only module-level imports of the optional `otel` extra; the resource
(OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES honoured, `acp-bridge` otherwise), handing
the builder's own span ids to the SDK, the SDK's batch span processor and periodic metric
reader over the exporters `otlp` builds (protocol, endpoint), counting what could not be
exported, and a shutdown that never takes longer than it is given.
Must never: block its caller on the network (exports run in the SDK's threads), let the
SDK's log reach stderr more than once, or register an exit hook that could hold the
bridge's exit.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from acp_bridge import __version__
from acp_bridge.capture.text_redaction import mask_text_secrets
from acp_bridge.errors import ConfigError
from acp_bridge.telemetry import spans as s
from acp_bridge.telemetry.otlp import ExportSettings as ExportSettings  # re-exported: what OtlpSink is given
from acp_bridge.telemetry.otlp import endpoint_of, metric_exporter, protocol_of, span_exporter
from acp_bridge.telemetry.spans import Observation, SpanRecord

log = logging.getLogger("acp_bridge.telemetry")

_KINDS = {s.INTERNAL: SpanKind.INTERNAL, s.CLIENT: SpanKind.CLIENT}
_SAMPLED_CACHE = 4096


def make_resource() -> Resource:
    detected = Resource.create()
    extra: dict[str, str] = {}
    name = detected.attributes.get("service.name")
    if not isinstance(name, str) or name.startswith("unknown_service"):
        extra["service.name"] = "acp-bridge"
    if "service.version" not in detected.attributes:
        extra["service.version"] = __version__
    return detected.merge(Resource(extra))


class _PresetIds(IdGenerator):
    """Hands the SDK the ids the builder chose (set just before each span is started)."""

    def __init__(self) -> None:
        self.span_id = self.trace_id = 1

    def generate_span_id(self) -> int:
        return self.span_id

    def generate_trace_id(self) -> int:
        return self.trace_id


# Loggers of the SDK's export path: what they say once the sink is built is a failure to
# export (said once, as the bridge's). Anything else, and anything said while the exporter
# and processor are built (a timeout, delay or compression they cannot read), is a
# setting the SDK did not like.
_EXPORT_LOGGERS = ("opentelemetry.exporter", "opentelemetry.sdk._shared_internal", "opentelemetry.sdk.trace.export",
                   "opentelemetry.sdk.metrics._internal.export")


def said_safely(record: logging.LogRecord) -> str:
    """An SDK log record's text with secrets kept out: the SDK quotes a malformed
    OTEL_EXPORTER_OTLP_HEADERS whole (an API key in it), so that one is named, not quoted;
    in any other, secret-looking values are masked as the capture masks them."""
    message = record.getMessage()
    if record.name == "opentelemetry.util.re" and message.startswith("Header format invalid"):
        return ("OTEL_EXPORTER_OTLP_HEADERS (or a _TRACES_/_METRICS_ variant) holds a header that is not "
                "name=value, URL-encoded; the exporter ignores it (its value is not repeated here)")
    return mask_text_secrets(message)


class _Quiet(logging.Handler):
    """Takes the SDK's log records: the first problem is said once, as the bridge's."""

    def __init__(self, owner: OtlpSink) -> None:
        super().__init__(logging.WARNING)
        self.owner = owner
        self.said: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        message = said_safely(record)
        if record.name.startswith(_EXPORT_LOGGERS) and not self.owner.building:
            self.owner.problem(message)
        elif message not in self.said:  # a setting it did not like, and what it does instead
            self.said.add(message)
            log.warning("telemetry: the OpenTelemetry SDK says: %s", message)


# Where the batch processor says it dropped a span ("Queue full"); the first is the SDK's
# since 1.34, the second its older home.
_DROP_LOGGERS = ("opentelemetry.sdk._shared_internal", "opentelemetry.sdk.trace.export")


class _CountDrops(logging.Filter):
    """Counts each span the batch processor drops. A filter put before the SDK's own: that
    one (a duplicate filter) lets one "Queue full" through in 20 s, so a handler would count
    one of thousands."""

    def __init__(self, owner: OtlpSink) -> None:
        super().__init__()
        self.owner = owner

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith("Queue full"):
            with self.owner.lock:
                self.owner.failed += 1
        return True


class _Counting(SpanExporter):
    """The real exporter, with what it could not export counted. The OTLP/HTTP exporter
    takes a redirect (3xx) for success and does not follow it: the spans went nowhere, so
    a redirect seen during an export (`saw_redirect`, a hook on its HTTP session) fails it."""

    def __init__(self, owner: OtlpSink) -> None:
        self.inner: SpanExporter | None = None
        self.owner = owner
        self._local = threading.local()  # the redirect an export in this thread saw

    def saw_redirect(self, status: int) -> None:
        self._local.redirect = status

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        assert self.inner is not None
        started = time.thread_time()  # this thread's CPU: encoding, not waiting on the network
        self._local.redirect = None
        try:
            result = self.inner.export(spans)
        except Exception as exc:
            result = SpanExportResult.FAILURE
            self.owner.problem(mask_text_secrets(f"{type(exc).__name__}: {exc}"))
        redirect = getattr(self._local, "redirect", None)
        if redirect is not None and result is SpanExportResult.SUCCESS:
            result = SpanExportResult.FAILURE
            self.owner.problem(f"the collector answered HTTP {redirect}, a redirect, which the exporter does "
                               "not follow: give the address it redirects to")
        with self.owner.lock:
            self.owner.export_cpu += time.thread_time() - started
            if result is SpanExportResult.SUCCESS:
                self.owner.exported += len(spans)
            else:
                self.owner.failed += len(spans)
        if result is not SpanExportResult.SUCCESS:
            self.owner.problem("the collector did not take the spans")
        return result

    def shutdown(self) -> None:
        if self.inner is not None:
            self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis) if self.inner is not None else True


class OtlpSink:
    """Spans and observations to an OTLP collector through the SDK (a `SpanSink`)."""

    def __init__(self, settings: ExportSettings, *, live: bool = True) -> None:
        self.live = live  # a running bridge (the relay goes on), not `export`
        self.lock = threading.Lock()
        self.exported = self.failed = 0
        self.handed = 0  # spans given to the batch processor (sampled)
        self.export_cpu = 0.0  # seconds of CPU the exporter's thread has spent, for the observer's budget
        self._said = False
        self.building = True  # what the SDK logs meanwhile is about its settings, not an export
        trace_protocol = protocol_of(settings, "TRACES")  # ConfigError: before anything is set up
        metric_protocol = protocol_of(settings, "METRICS") if settings.metrics else None
        self._handler = _Quiet(self)
        sdk_log = logging.getLogger("opentelemetry")
        sdk_log.addHandler(self._handler)
        sdk_log.propagate = False  # not Python's last-resort handler: said once, by `problem`
        drops = _CountDrops(self)
        for name in _DROP_LOGGERS:
            logging.getLogger(name).filters.insert(0, drops)
        # Said on stderr and in the log file: a user, password or token in it is masked.
        self.where = mask_text_secrets(settings.endpoint or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                                       or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "the default OTLP endpoint")
        try:
            self._build(settings, trace_protocol, metric_protocol)
        except ValueError as exc:  # an OTEL_* variable the SDK refuses (OTEL_BSP_*, a sampler argument)
            raise ConfigError(f"OpenTelemetry settings: {exc}") from None
        finally:
            self.building = False

    def _build(self, settings: ExportSettings, trace_protocol: str, metric_protocol: str | None) -> None:
        resource = make_resource()
        self._ids = _PresetIds()
        self.provider = TracerProvider(resource=resource, id_generator=self._ids, shutdown_on_exit=False)
        counting = _Counting(self)
        counting.inner = span_exporter(trace_protocol, endpoint_of(settings, "TRACES", trace_protocol),
                                       counting.saw_redirect)
        self.processor = BatchSpanProcessor(counting)
        try:  # what the processor read too: how many spans it queues before it drops
            self.queue_size = int(os.environ.get("OTEL_BSP_MAX_QUEUE_SIZE", "2048"))
        except ValueError:
            self.queue_size = 2048
        self.provider.add_span_processor(self.processor)
        self.tracer = self.provider.get_tracer("acp_bridge", __version__)
        self._sampled: OrderedDict[int, bool] = OrderedDict()
        self.meters: MeterProvider | None = None
        self._instruments: dict[str, Any] = {}
        if metric_protocol is not None:
            reader = PeriodicExportingMetricReader(
                metric_exporter(metric_protocol, endpoint_of(settings, "METRICS", metric_protocol)))
            self.meters = MeterProvider(resource=resource, metric_readers=[reader], shutdown_on_exit=False)
            meter = self.meters.get_meter("acp_bridge", __version__)
            for name in s.HISTOGRAMS:
                self._instruments[name] = meter.create_histogram(name, unit="s")
            self._instruments[s.REQUESTS] = meter.create_counter(s.REQUESTS, unit="{request}")
            self._instruments[s.BYTES] = meter.create_counter(s.BYTES, unit="By")
            self._instruments[s.MESSAGES] = meter.create_counter(s.MESSAGES, unit="{message}")

    def problem(self, text: str) -> None:
        """Something could not be exported: said once on stderr (the exporter's errors quote
        the URL: secrets masked); the rest is counted."""
        if self._said:
            return
        self._said = True
        text = mask_text_secrets(text)
        if self.live:
            log.warning("telemetry: cannot export to %s (%s); telemetry is dropped and counted, the relay "
                        "goes on (said once)", self.where, text.rstrip("."))
        else:
            log.warning("telemetry: cannot export to %s (%s); what was not sent is counted (said once)",
                        self.where, text.rstrip("."))

    def spans(self, records: list[SpanRecord]) -> None:
        for record in records:
            self._start(record)

    def flush(self) -> None:
        """Send what is queued now, waiting for it (for `export`, never for a live bridge)."""
        self.processor.force_flush()

    def _start(self, record: SpanRecord) -> None:
        self._ids.span_id, self._ids.trace_id = record.span_id, record.trace_id
        context = Context()
        if record.parent_id is not None:
            flags = TraceFlags(TraceFlags.SAMPLED if self._is_sampled(record.trace_id) else TraceFlags.DEFAULT)
            parent = SpanContext(record.trace_id, record.parent_id, is_remote=False, trace_flags=flags)
            context = trace.set_span_in_context(NonRecordingSpan(parent), context)
        span = self.tracer.start_span(record.name, context=context, kind=_KINDS.get(record.kind, SpanKind.INTERNAL),
                                      attributes=record.attributes, start_time=_ns(record.start))
        for name, wall, attrs in record.events:
            span.add_event(name, attrs, timestamp=_ns(wall))
        if record.error is not None:
            span.set_status(Status(StatusCode.ERROR, record.error))
        span.end(end_time=_ns(record.end if record.end is not None else record.start))
        if span.get_span_context().trace_flags.sampled:
            self.handed += 1  # to the batch processor

    def _is_sampled(self, trace_id: int) -> bool:
        """The sampler's decision for a trace, asked as for its root span (which ends last,
        so its children are exported first and must carry the same decision)."""
        known = self._sampled.get(trace_id)
        if known is None:
            if len(self._sampled) >= _SAMPLED_CACHE:
                self._sampled.popitem(last=False)
            decision = self.provider.sampler.should_sample(Context(), trace_id, "session")
            known = self._sampled[trace_id] = decision.decision.is_sampled()  # type: ignore[no-untyped-call]
        return known

    def observe(self, observations: list[Observation]) -> None:
        for obs in observations:
            instrument = self._instruments.get(obs.instrument)
            if instrument is None:
                continue
            attrs = dict(obs.attributes)
            if obs.instrument in s.HISTOGRAMS:
                instrument.record(obs.value, attrs)
            else:
                instrument.add(obs.value, attrs)

    def shutdown(self, timeout: float) -> bool:
        """Flush and stop, in at most `timeout` seconds (a collector that is down or slow
        cannot hold the bridge's exit); whether that finished in time."""
        done = threading.Event()

        def stop() -> None:
            try:
                self.provider.shutdown()
                if self.meters is not None:
                    self.meters.shutdown(timeout_millis=max(1.0, timeout * 1000))
            except Exception as exc:
                self.problem(f"{type(exc).__name__}: {exc}")
            finally:
                done.set()

        threading.Thread(target=stop, name="acp-bridge-telemetry-shutdown", daemon=True).start()
        if not done.wait(timeout):
            self.problem(f"the collector did not answer within {timeout:g} s at exit")
        # The handler stays: an export still retrying in the SDK's thread may log after
        # this, and with no handler Python's last resort would print it on stderr.
        with self.lock:
            failed, exported = self.failed, self.exported
        if not done.is_set():  # what was still queued or in an export at exit is lost too
            failed = max(failed, self.handed - exported)
        if failed:
            log.info("telemetry: %d spans exported, %d dropped", exported, failed)
        return done.is_set()


def _ns(wall: float) -> int:
    return int(wall * 1e9)
