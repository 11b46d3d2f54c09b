// Package metrics is what offstage mcp --http serves at /metrics, in
// Prometheus' text format: its tasks, their output and notices, the
// journal's backlog and the sessions open. It keeps a registry of its own
// (not Prometheus' global one), so two servers in one process, or a test,
// never share counters.
//
// Tasks are counted as their tables record them (Wrap hooks every session
// a Journal records), so nothing polls: a change is counted under the
// table's lock, in a map bounded by the tasks still unfinished. Label
// values are bounded: a task's kind is "shell", "agent" or "other", its
// state one of journal.States, the reason a task ended one of
// task.Enders (who ended it: self, model, user, …) or "other", a
// notice's kind one of offstage's own or "other". No label carries a
// task or session id.
//
// The metrics, all prefixed offstage_:
//
//	tasks_started_total{kind}            tasks whose work began
//	tasks_finished_total{kind,state,reason}  tasks that ended, by final state and who ended them
//	tasks_running{kind}, tasks_queued{kind}  unfinished tasks now
//	task_duration_seconds{kind}          from start to end (histogram)
//	task_output_bytes_total              output of the shells that ended
//	task_notices_total{kind}             notices tasks posted
//	containment_leftovers_killed_total   processes a shell left behind, killed
//	sessions_open                        MCP sessions with a task table
//	journal_queue_records                records waiting to be written
//	journal_write_errors_total           failed batch writes (each retry)
//	journal_records_lost_total           records the journal could not keep
//	model_tokens_total{kind,profile}     tokens of model calls: kind is input
//	                                     (cached ones included), cached_input
//	                                     or output; profile is the sub-agent's
//	                                     profile, "top" for a session's top
//	                                     level, "other" for a name the
//	                                     session was not configured with
//	model_calls_total{profile}           model calls
package metrics

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/offstage/offstage/agent"
	"github.com/offstage/offstage/journal"
	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/task"
	"github.com/offstage/offstage/tools"
)

// Metrics holds one server's metrics. Its methods are safe for
// concurrent use.
type Metrics struct {
	reg      *prometheus.Registry
	started  *prometheus.CounterVec
	finished *prometheus.CounterVec
	running  *prometheus.GaugeVec
	queued   *prometheus.GaugeVec
	duration *prometheus.HistogramVec
	output   prometheus.Counter
	notices  *prometheus.CounterVec
	leftover prometheus.Counter
	tokens   *prometheus.CounterVec
	calls    *prometheus.CounterVec
}

// Sources are read at each scrape; nil ones are not exported.
type Sources struct {
	// Sessions returns the sessions open (mcpserver.Service.Sessions).
	Sessions func() int
	// Journal returns the journal's stats (journal.Recorder.Stats).
	Journal func() journal.Stats
}

// New returns a server's metrics, with Go's and the process's own
// (go_*, process_*) in the same registry.
func New(src Sources) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.started = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "offstage_tasks_started_total", Help: "Tasks whose work began, by kind."}, []string{"kind"})
	m.finished = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "offstage_tasks_finished_total", Help: "Tasks that ended, by kind, final state and who or what ended them (reason: self, model, user, operator, parent, timeout, limit, session, supervisor, host)."}, []string{"kind", "state", "reason"})
	m.running = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "offstage_tasks_running", Help: "Tasks running now, by kind."}, []string{"kind"})
	m.queued = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "offstage_tasks_queued", Help: "Tasks waiting for a slot now, by kind."}, []string{"kind"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "offstage_task_duration_seconds", Help: "How long tasks ran, from their start to their end, by kind.",
		Buckets: []float64{0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 4 * 3600}}, []string{"kind"})
	m.output = prometheus.NewCounter(prometheus.CounterOpts{Name: "offstage_task_output_bytes_total", Help: "Bytes of output (stdout and stderr) of the shells that ended."})
	m.notices = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "offstage_task_notices_total", Help: "Notices tasks posted to their owner (waiting_for_input, watch, other), by kind."}, []string{"kind"})
	m.leftover = prometheus.NewCounter(prometheus.CounterOpts{Name: "offstage_containment_leftovers_killed_total", Help: "Processes a shell left behind when its leader exited, killed by the containment."})
	m.tokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "offstage_model_tokens_total", Help: "Tokens of model calls, by kind (input, cached_input, output) and sub-agent profile (top for a session's top level)."}, []string{"kind", "profile"})
	m.calls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "offstage_model_calls_total", Help: "Model calls, by sub-agent profile (top for a session's top level)."}, []string{"profile"})
	m.reg.MustRegister(m.started, m.finished, m.running, m.queued, m.duration, m.output, m.notices, m.leftover, m.tokens, m.calls,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, k := range kinds {
		m.started.WithLabelValues(k)
		m.running.WithLabelValues(k)
		m.queued.WithLabelValues(k)
	}
	if src.Sessions != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "offstage_sessions_open", Help: "MCP sessions open (with a task table)."},
			func() float64 { return float64(src.Sessions()) }))
	}
	if src.Journal != nil {
		m.reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "offstage_journal_queue_records", Help: "Journal records waiting to be written."},
				func() float64 { return float64(src.Journal().Queued) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "offstage_journal_write_errors_total", Help: "Journal batch writes that failed (each retry counts)."},
				func() float64 { return float64(src.Journal().WriteErrors) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "offstage_journal_records_lost_total", Help: "Journal records not written: dropped from a full queue, given up, or after damage."},
				func() float64 { return float64(src.Journal().Lost) }))
	}
	return m
}

// Handler serves the metrics in Prometheus' text format. It does no
// authentication: the caller wraps it (mcpserver's bearer token).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, ErrorHandling: promhttp.ContinueOnError})
}

// Registry returns the registry, for a test to gather from.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// kinds are the task kinds offstage labels by; others are "other".
var kinds = []string{"shell", "agent", "other"}

func kindLabel(k string) string {
	if k == "shell" || k == "agent" {
		return k
	}
	return "other"
}

func noticeLabel(k string) string {
	switch k {
	case tools.NoticeWaitingForInput, tools.NoticeWatch, task.NoticesDropped:
		return k
	}
	return "other"
}

// reasonLabel is who ended a task, as task.Enders names it.
func reasonLabel(by string) string {
	if slices.Contains(task.Enders, by) {
		return by
	}
	return "other"
}

// stateLabel is a finished task's state as journal.States names it.
func stateLabel(s task.State) string { return journal.StateOf(s).String() }

// Wrap returns j with every session it records counted: j may be nil
// (no journal), and sessions are then counted without being recorded.
func (m *Metrics) Wrap(j agent.Journal) agent.Journal { return &counted{next: j, m: m} }

type counted struct {
	next agent.Journal
	m    *Metrics
}

func (c *counted) Record(ctx context.Context, info agent.SessionInfo, cfg *agent.Config) (agent.Record, error) {
	var rec agent.Record = noRecord(info.ID)
	if c.next != nil {
		r, err := c.next.Record(ctx, info, cfg)
		if err != nil {
			return nil, err
		}
		rec = r
	}
	cfg.Tasks.Recorder = c.m.recorder(cfg.Tasks.Recorder)
	profiles := make(map[string]bool)
	list := cfg.Profiles
	if list == nil {
		list = agent.DefaultProfiles() // what the session will have
	}
	for _, p := range list {
		profiles[p.Name] = true
	}
	onCall := cfg.OnModelCall
	cfg.OnModelCall = func(call agent.ModelCall) {
		c.m.modelCall(call, profiles)
		if onCall != nil {
			onCall(call)
		}
	}
	onExit := cfg.Tools.OnShellExit
	cfg.Tools.OnShellExit = func(id string, p *proc.Process) {
		c.m.shellExit(p)
		if onExit != nil {
			onExit(id, p)
		}
	}
	return rec, nil
}

func (c *counted) Load(ctx context.Context, id string) (*agent.Resume, error) {
	if c.next == nil {
		return nil, agent.ErrUnknownSession
	}
	return c.next.Load(ctx, id)
}

func (c *counted) List(ctx context.Context, dir string, limit int) ([]agent.SessionSummary, error) {
	if c.next == nil {
		return nil, nil
	}
	return c.next.List(ctx, dir, limit)
}

// noRecord is the record of a session without a journal.
type noRecord string

func (n noRecord) ID() string        { return string(n) }
func (noRecord) Delivered(...string) {}
func (noRecord) End()                {}

// modelCall counts a model call's tokens under its profile: one of the
// session's (known), "top", or "other", so the label stays bounded.
func (m *Metrics) modelCall(call agent.ModelCall, known map[string]bool) {
	profile := call.Profile
	switch {
	case profile == "":
		profile = "top"
	case !known[profile]:
		profile = "other"
	}
	m.calls.WithLabelValues(profile).Add(float64(call.Usage.ModelCalls))
	m.tokens.WithLabelValues("input", profile).Add(float64(call.Usage.InputTokens))
	m.tokens.WithLabelValues("cached_input", profile).Add(float64(call.Usage.CachedInputTokens))
	m.tokens.WithLabelValues("output", profile).Add(float64(call.Usage.OutputTokens))
}

// shellExit counts what an ended shell printed and left behind.
func (m *Metrics) shellExit(p *proc.Process) {
	e, ok := p.Exit()
	if !ok {
		return
	}
	m.output.Add(float64(e.Bytes))
	m.leftover.Add(float64(e.Contained.Leftovers))
}

// recorder returns a task.Recorder for one table that counts its changes
// and passes them on to next (nil: none).
func (m *Metrics) recorder(next task.Recorder) task.Recorder {
	return &tally{m: m, next: next, live: make(map[string]live)}
}

// live is an unfinished task as the tally knows it.
type live struct {
	kind    string
	state   task.State
	started time.Time
}

// tally counts one table's changes. The table calls Record under its
// lock, in order; mu guards live against nothing else but is cheap and
// keeps the race detector's word plain.
type tally struct {
	m    *Metrics
	next task.Recorder
	mu   sync.Mutex
	live map[string]live // the table's unfinished tasks: bounded by them
}

// Pace passes the journal's backpressure on (task.Pacer).
func (t *tally) Pace() {
	if p, ok := t.next.(task.Pacer); ok {
		p.Pace()
	}
}

func (t *tally) Record(c *task.Change) {
	t.count(&c.Event)
	if t.next != nil {
		t.next.Record(c)
	}
}

func (t *tally) count(e *task.Event) {
	m := t.m
	kind := kindLabel(e.Kind)
	t.mu.Lock()
	defer t.mu.Unlock()
	switch e.Type {
	case task.EventSpawned:
		l := live{kind: kind, state: e.State}
		t.gauge(l.state).WithLabelValues(kind).Inc()
		if e.State == task.Running { // spawned straight into a slot
			l.started = e.Time
		}
		t.live[e.ID] = l
	case task.EventStarted:
		l, ok := t.live[e.ID]
		if !ok {
			l = live{kind: kind, state: task.Queued}
			t.gauge(task.Queued).WithLabelValues(kind).Inc()
		}
		t.gauge(l.state).WithLabelValues(kind).Dec()
		l.state, l.started = task.Running, e.Time
		t.gauge(l.state).WithLabelValues(kind).Inc()
		t.live[e.ID] = l
		m.started.WithLabelValues(kind).Inc() // after the gauges (one scrape is no snapshot, though: each metric is gathered on its own)
	case task.EventFinished:
		// Counted before the gauge drops (one scrape is no snapshot,
		// though: the registry gathers each metric on its own).
		m.finished.WithLabelValues(kind, stateLabel(e.State), reasonLabel(e.EndedBy)).Inc()
		if l, ok := t.live[e.ID]; ok {
			t.gauge(l.state).WithLabelValues(kind).Dec()
			if !l.started.IsZero() {
				m.duration.WithLabelValues(kind).Observe(e.Time.Sub(l.started).Seconds())
			}
			delete(t.live, e.ID)
		}
	case task.EventNotice:
		k, _, _ := strings.Cut(e.Text, ": ")
		m.notices.WithLabelValues(noticeLabel(k)).Inc()
	}
}

// gauge is the gauge of an unfinished state: running, or else queued.
func (t *tally) gauge(s task.State) *prometheus.GaugeVec {
	if s == task.Running {
		return t.m.running
	}
	return t.m.queued
}
