// Package audit delivers payload-free InterceptionRecords (AGENT-HOOKS-0.1
// §10.3) to durable and queryable places without ever holding up a
// decision.
//
// # Sinks
//
//   - [OpenFile]: a JSON Lines file, one record per line, appended with
//     0600 permissions (parent directories are created 0700), with a
//     configurable fsync policy ([FsyncAlways], [FsyncInterval],
//     [FsyncNever]) and size-based rotation ([WithRotation]).
//   - [NewWriterSink] / [NewStdoutSink]: the same lines to an io.Writer.
//   - [Ring]: a bounded in-memory ring queried newest first by session id,
//     behind GET /agent-hooks/v1/records?session=.
//   - [Fanout]: one record to several sinks, encoded once.
//
// Each line is the JSON of a points.Record exactly as the emitter built it;
// when points.Record gains a request id member it appears in the lines
// without a change here.
//
// # Never blocking a decision
//
// [Sink.Write] (the points.RecordSink method) encodes the record, then makes
// a non-blocking send into a bounded channel that one goroutine drains. When
// the channel is full the record is dropped, counted (Stats.Dropped and
// [Reporter.RecordsDropped]) and a log line says so at most once per log
// interval, with the records dropped since the previous line and the
// total; the drops it held back get a line when the interval ends (or at
// Close), so the lines add up to the counter. Write and fsync failures are
// counted ([Reporter.SinkError]) and logged at the same rate, the records
// they lose as drops. A file sink whose file was removed while its path
// cannot be opened again drops (and counts) records instead of writing
// them where no reader would see them, until the path opens again.
// [Sink.Close] drains the queue, fsyncs and closes.
//
// # Acknowledgement
//
// A record is acknowledged, and then survives a kill of the process, when:
//
//   - asynchronous mode (the default): a [Sink.Flush] that started after
//     Write returned has returned nil. Flush writes and fsyncs everything
//     queued before it and returns an error when any record was dropped or
//     failed since the previous Flush, so nil means "all of them".
//   - synchronous mode ([WithSyncWrite], what fsync: always maps to):
//     [Sink.Append] has returned nil. Append writes the line and fsyncs the
//     file under a mutex before returning, so the caller waits for the disk;
//     this is the one mode that trades decision latency for durability, and
//     only because the operator asked for it.
//
// # Torn tails
//
// A crash can leave the last line unterminated, never an acknowledged one:
// acknowledgement comes after the whole line, newline included, was written.
// [OpenFile] therefore truncates any bytes after the last newline before it
// appends (and logs how many), so a file always parses line by line, and
// [Scan] reports such a tail as TornBytes rather than as corruption.
//
// # Logs
//
// [ReplaceAttr] (and [HandlerOptions], [NewLogHandler]) is a log/slog
// handler option that keeps payloads out of logs: see its doc for the rules.
package audit
