package audit

import (
	"errors"
	"io"

	"github.com/hooksproxy/hooksproxy/points"
)

// lineWriter is implemented by this package's sinks so that Fanout encodes
// a record once for all of them.
type lineWriter interface {
	writeLine(session string, line []byte)
}

// Fanout hands each record to several sinks, in order. The sinks of this
// package share one encoding of the record; a panicking sink is contained
// so that the ones after it still get the record. It implements
// points.RecordSink.
type Fanout struct {
	sinks []points.RecordSink
}

// NewFanout returns a fan-out to sinks; nil entries are skipped.
func NewFanout(sinks ...points.RecordSink) *Fanout {
	f := &Fanout{}
	for _, s := range sinks {
		if s != nil {
			f.sinks = append(f.sinks, s)
		}
	}
	return f
}

// Sinks returns the sinks, in order.
func (f *Fanout) Sinks() []points.RecordSink { return append([]points.RecordSink(nil), f.sinks...) }

// Write implements points.RecordSink.
func (f *Fanout) Write(r *points.Record) {
	var line []byte
	encoded := false
	for _, s := range f.sinks {
		lw, ok := s.(lineWriter)
		if ok && !encoded {
			encoded = true
			var err error
			if line, err = encode(r); err != nil {
				line = nil // each sink counts its own failure below
			}
		}
		func() {
			defer func() { _ = recover() }()
			if ok && line != nil {
				lw.writeLine(r.SessionID, line)
			} else {
				s.Write(r)
			}
		}()
	}
}

// Flush flushes every sink that has a Flush() error method and joins their
// errors.
func (f *Fanout) Flush() error {
	var errs []error
	for _, s := range f.sinks {
		if fl, ok := s.(interface{ Flush() error }); ok {
			errs = append(errs, fl.Flush())
		}
	}
	return errors.Join(errs...)
}

// Close closes every sink that is an io.Closer and joins their errors.
func (f *Fanout) Close() error {
	var errs []error
	for _, s := range f.sinks {
		if c, ok := s.(io.Closer); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}
