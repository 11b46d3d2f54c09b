package acpserver

// TestRecorder is testRecorder, for the package's outside tests.
var TestRecorder = testRecorder
