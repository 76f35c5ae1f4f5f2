package consolidator

import (
	"context"
	"log/slog"

	"github.com/nanofleet/nanofleet/pkg/llm"
)

// share is one user's part of a model call: their chunk's weight in it.
type share struct {
	payer  string
	weight int
}

// shares are a batch's users, each part weighed by its chunk's tokens.
func shares(batch []*part) []share {
	out := make([]share, len(batch))
	for i, p := range batch {
		out[i] = share{payer: p.req.GetPayer(), weight: p.tokens}
	}
	return out
}

// charge counts a model call's tokens (prompt + completion, as a turn's)
// in the daily usage of the users whose turns it consolidated: all of
// them for one user, split by weight among a batch's (see split). It is
// best effort: a count that fails is logged and the consolidation goes
// on, since its memory matters more than the count, and is never retried
// for it. A share without a payer (a request from before requests named
// one) is counted for no one. Counted also when the job ended meanwhile:
// the tokens were spent.
func (c *Consolidator) charge(ctx context.Context, u llm.Usage, ss []share, log *slog.Logger) {
	n := int64(u.PromptTokens) + int64(u.CompletionTokens)
	if n <= 0 || len(ss) == 0 {
		return
	}
	ctx = context.WithoutCancel(ctx)
	for _, s := range split(n, ss) {
		if s.payer == "" {
			log.Debug("consolidation tokens counted for no one: the request names no payer", "tokens", s.tokens)
			continue
		}
		if err := c.count.Add(ctx, s.payer, s.tokens); err != nil {
			log.Warn("token usage: consolidation not counted", "payer", s.payer, "tokens", s.tokens, "err", err)
		}
	}
}

// payerTokens is what one user is counted of a call.
type payerTokens struct {
	payer  string
	tokens int64
}

// split divides n tokens among ss in proportion to their weights (equally
// if none weighs anything), the remainder of the division going one token
// each to the first shares, so that the parts add up to n; shares of one
// payer are added together, in the order of their first share.
func split(n int64, ss []share) []payerTokens {
	var total int64
	for _, s := range ss {
		total += int64(max(s.weight, 0))
	}
	weight := func(s share) int64 {
		if total == 0 {
			return 1
		}
		return int64(max(s.weight, 0))
	}
	if total == 0 {
		total = int64(len(ss))
	}
	parts := make([]int64, len(ss))
	left := n
	for i, s := range ss {
		parts[i] = n * weight(s) / total
		left -= parts[i]
	}
	for i := 0; left > 0; i = (i + 1) % len(ss) {
		parts[i]++
		left--
	}
	var out []payerTokens
	at := map[string]int{}
	for i, s := range ss {
		if j, ok := at[s.payer]; ok {
			out[j].tokens += parts[i]
			continue
		}
		at[s.payer] = len(out)
		out = append(out, payerTokens{payer: s.payer, tokens: parts[i]})
	}
	return out
}
