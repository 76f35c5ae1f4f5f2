// Package agent runs nanobot's ReAct loop for one turn: call the model with
// the tools, run the tool calls it asks for, append their results, and
// repeat until the model answers without tool calls or the iteration
// budget is spent, in which case the model is asked for a final answer
// without tools so the user never gets nothing.
//
// Tool calls of one model step run in order of appearance, except that a
// run of consecutive read-only calls executes concurrently; an exclusive
// call always runs alone. After each model and tool step the loop hands its
// messages to [Hooks.Checkpoint], so a turn cut off by a crash resumes
// where it stopped instead of from scratch.
package agent
