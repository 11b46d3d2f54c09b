package proc_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"

	"github.com/offstage/offstage/proc"
	"github.com/offstage/offstage/task"
)

// Benchmark names are fixed so results can be compared over time; run them
// with: go test -run '^$' -bench . ./proc/

// BenchmarkSpawnRaw is the yardstick: os/exec runs sh -c true.
func BenchmarkSpawnRaw(b *testing.B) {
	defer cpuPerOp(b)()
	for b.Loop() {
		if err := exec.Command("/bin/sh", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSpawn: ours, start and wait, with its group, capture and
// lifeline.
func BenchmarkSpawn(b *testing.B) {
	defer cpuPerOp(b)()
	ctx := context.Background()
	for b.Loop() {
		p, err := proc.Start(ctx, proc.Config{Command: "true"})
		if err != nil {
			b.Fatal(err)
		}
		if e, _ := p.Wait(ctx); e.Code != 0 {
			b.Fatalf("exit %+v", e)
		}
	}
}

const captureBytes = 256 << 20

// BenchmarkCaptureRaw: read a child's 256 MiB of output straight from the
// pipe, 64 KiB at a time, and throw it away.
func BenchmarkCaptureRaw(b *testing.B) {
	b.SetBytes(captureBytes)
	for b.Loop() {
		cmd := exec.Command(os.Args[0], "print", strconv.Itoa(captureBytes))
		cmd.Env = append(os.Environ(), helperEnv+"=1")
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		n, err := io.CopyBuffer(io.Discard, onlyReader{out}, make([]byte, 64<<10))
		if err != nil || n != captureBytes {
			b.Fatalf("read %d bytes, %v", n, err)
		}
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCaptureTeeRaw: the child's 256 MiB copied straight into a
// file with io.Copy, the limit for BenchmarkCaptureLog on this machine.
func BenchmarkCaptureTeeRaw(b *testing.B) {
	b.SetBytes(captureBytes)
	path := filepath.Join(b.TempDir(), "out.log")
	for b.Loop() {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "print", strconv.Itoa(captureBytes))
		cmd.Env = append(os.Environ(), helperEnv+"=1")
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(f, out)
		if err != nil || n != captureBytes {
			b.Fatalf("copied %d bytes, %v", n, err)
		}
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

// onlyReader hides WriterTo so io.CopyBuffer uses the buffer.
type onlyReader struct{ io.Reader }

func benchCapture(b *testing.B, logPath string) {
	b.SetBytes(captureBytes)
	ctx := context.Background()
	cfg := helperConfig("print", strconv.Itoa(captureBytes))
	cfg.LogPath, cfg.LogMaxBytes = logPath, captureBytes
	for b.Loop() {
		p, err := proc.Start(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if e, _ := p.Wait(ctx); e.Code != 0 || e.Bytes != captureBytes || e.LogCut != 0 {
			b.Fatalf("exit %+v", e)
		}
	}
}

// BenchmarkCapture: ours, memory only (head and rings).
func BenchmarkCapture(b *testing.B) { benchCapture(b, "") }

// BenchmarkCaptureLog: ours, memory and a log file that keeps everything.
func BenchmarkCaptureLog(b *testing.B) {
	benchCapture(b, filepath.Join(b.TempDir(), "out.log"))
}

// BenchmarkCaptureWatch: BenchmarkCapture with a task_wait until running
// the whole time, looking for a line that never comes (so it reads and
// matches all 256 MiB, as it arrives).
func BenchmarkCaptureWatch(b *testing.B) {
	b.SetBytes(captureBytes)
	ctx := context.Background()
	re := regexp.MustCompile(`ERROR|panic:`)
	var skipped int64
	for b.Loop() {
		p, err := proc.Start(ctx, helperConfig("print", strconv.Itoa(captureBytes)))
		if err != nil {
			b.Fatal(err)
		}
		watched := make(chan proc.LineMatch, 1)
		go func() {
			m, _ := p.WaitLine(ctx, 0, re)
			watched <- m
		}()
		if e, _ := p.Wait(ctx); e.Code != 0 || e.Bytes != captureBytes {
			b.Fatalf("exit %+v", e)
		}
		m := <-watched
		if m.Found || m.Next != captureBytes {
			b.Fatalf("the watch ended at %+v, want at the end of the output", m)
		}
		skipped += m.Skipped
	}
	b.ReportMetric(float64(skipped)/float64(b.N)/captureBytes, "skipped/op")
}

// BenchmarkStop: a child that obeys SIGTERM; Stop until it is reaped.
func BenchmarkStop(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		p, err := proc.Start(ctx, proc.Config{Command: "exec sleep 1000"})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		p.Stop(proc.Config{}.Grace)
		if e, _ := p.Wait(ctx); e.Signal == 0 {
			b.Fatalf("exit %+v, want killed by SIGTERM", e)
		}
	}
}

// BenchmarkSpawnForkingRaw and BenchmarkSpawnForking: the same with a
// command that forks (a pipeline), so the leader's exit costs ours a scan
// of /proc for what it left; the number reported is per spawn, on a
// machine with as many processes as this one has.
func BenchmarkSpawnForkingRaw(b *testing.B) {
	defer cpuPerOp(b)()
	for b.Loop() {
		if err := exec.Command("/bin/sh", "-c", "true | true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSpawnForking(b *testing.B) {
	defer cpuPerOp(b)()
	ctx := context.Background()
	for b.Loop() {
		p, err := proc.Start(ctx, proc.Config{Command: "true | true"})
		if err != nil {
			b.Fatal(err)
		}
		if e, _ := p.Wait(ctx); e.Code != 0 {
			b.Fatalf("exit %+v", e)
		}
	}
}

// BenchmarkProcesses: counting a running command's processes, one scan of
// /proc; processes/op says how many processes the machine had.
func BenchmarkProcesses(b *testing.B) {
	p, err := proc.Start(context.Background(), proc.Config{Command: "sleep 1000 & exec sleep 1000"})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { p.Stop(0); p.Wait(context.Background()) }()
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			n++
		}
	}
	for b.Loop() {
		p.Processes()
	}
	b.ReportMetric(float64(n), "processes/op")
}

// BenchmarkSpawnTTY: BenchmarkSpawn on a terminal of its own.
func BenchmarkSpawnTTY(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		p, err := proc.Start(ctx, proc.Config{Command: "true", TTY: true})
		if err != nil {
			b.Fatal(err)
		}
		if e, _ := p.Wait(ctx); e.Code != 0 {
			b.Fatalf("exit %+v", e)
		}
	}
}

// BenchmarkCaptureNotifyOn: BenchmarkCapture through a shell task whose
// output carries a notify_on watch (ShellOptions.NotifyOn).
func BenchmarkCaptureNotifyOn(b *testing.B) {
	b.SetBytes(captureBytes)
	tb := task.New(context.Background(), task.Options{})
	defer tb.Close(context.Background())
	v := tb.View("")
	opts := proc.ShellOptions{NotifyOn: regexp.MustCompile(`ERROR|panic:`)}
	for b.Loop() {
		id, err := proc.SpawnShell(v, helperConfig("print", strconv.Itoa(captureBytes)), opts)
		if err != nil {
			b.Fatal(err)
		}
		done, _ := v.Done(id)
		<-done
		if r := v.Drain(); len(r) != 1 || r[0].State != task.Completed {
			b.Fatalf("results %+v", r)
		}
		if n := v.Notices(); n != nil {
			b.Fatalf("notices %+v, want none", n)
		}
	}
}

// bystanders starts n sleep processes that belong to no task, the other
// processes of a busy machine, and ends them with the benchmark.
func bystanders(b *testing.B, n int) {
	b.Helper()
	cmd := exec.Command("/bin/sh", "-c", "i=0; while [ $i -lt "+strconv.Itoa(n)+" ]; do sleep 1000 & i=$((i+1)); done; echo up; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	if _, err := out.Read(make([]byte, 8)); err != nil {
		b.Fatal(err)
	}
}

// machineProcesses counts the processes on the machine.
func machineProcesses() int {
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			n++
		}
	}
	return n
}

// The same on a machine with 2,000 more processes: in ModeMarks the
// leader's exit costs a scan of them all, in ModeCgroup a read of the
// task's own cgroup. Compare with OFFSTAGE_CONTAINMENT=marks.
func BenchmarkSpawnForkingRaw2000(b *testing.B) {
	bystanders(b, 2000)
	BenchmarkSpawnForkingRaw(b)
	b.ReportMetric(float64(machineProcesses()), "processes")
}

func BenchmarkSpawnForking2000(b *testing.B) {
	bystanders(b, 2000)
	BenchmarkSpawnForking(b)
	b.ReportMetric(float64(machineProcesses()), "processes")
}

func BenchmarkProcesses2000(b *testing.B) {
	bystanders(b, 2000)
	BenchmarkProcesses(b)
}

// cpuPerOp reports the CPU time (user and system, of the benchmark and
// of the children it reaped) per operation, "cpu-ns/op": on a machine
// shared with other work, wall time per spawn mostly measures waiting for
// a core, and CPU time what the spawn costs. Call as defer cpuPerOp(b)().
func cpuPerOp(b *testing.B) func() {
	start := cpuTime()
	return func() {
		b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
	}
}

func cpuTime() int64 {
	var self, children syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	ns := func(tv syscall.Timeval) int64 { return tv.Nano() }
	return ns(self.Utime) + ns(self.Stime) + ns(children.Utime) + ns(children.Stime)
}
