"""The scenario suite: end-to-end memory behaviour as YAML scripts, and their runner.

A scenario is a short scripted conversation (``retain`` turns, ``advance`` of event time,
``forget`` requests) interleaved with ``recall`` questions that carry expectations. Each scenario
runs in fresh namespaces through the public client, so the whole stack (log, stages, views,
recall) is exercised exactly as an agent would use it. ``docs/SCENARIOS.md`` documents the format;
the suites live in ``scenarios/``.

Modules, in dependency order:

- ``steps``: durations, times, turns and the four steps (pure models);
- ``timeline``: the event time of every step (pure);
- ``format``: scenario and file models, loading with errors that name the field, selection;
- ``checks``: a recall's results against its expectations (pure);
- ``runner``: the ``MemoryBackend`` seam, running scenarios, the real stack;
- ``report``: pass-rate tables and the JSON report;
- ``cli``: ``hindsight scenarios run|validate``.

Everything except running against the real stack is unit-tested without a broker.
"""
