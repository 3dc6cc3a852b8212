-- venturi V8: trace context.  One new table; the seed tables are unchanged.

-- The trace context of the enqueue that created a job (W3C traceparent and
-- tracestate, as the OpenTelemetry propagator writes them), written in the
-- enqueue's transaction by venturi_sa.contrib.otel; each run's span starts
-- from it.  One row per job, at most; goes with its job (ON DELETE CASCADE).
CREATE TABLE {{prefix}}_traces (
    job_id   text NOT NULL,
    carrier  jsonb NOT NULL,
    CONSTRAINT {{prefix}}_traces_pkey PRIMARY KEY (job_id),
    CONSTRAINT {{prefix}}_traces_job_id_fkey FOREIGN KEY (job_id)
        REFERENCES {{prefix}}_jobs (id) ON DELETE CASCADE
);
