package bench

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
)

// Plot draws throughput and p99 latency against worker processes (workers
// suite) and against concurrent sessions (0 ms and slow-model all-in-one
// sweeps) as a 2×2 grid of line charts in SVG.
func Plot(rep *Report) string {
	var workers, workersIdeal, workersP99 []pt
	var zeroTP, zeroP99, binTP, binP99, slowTP, slowP99, slowIdeal []pt
	slowLabel := "slow model"
	for _, s := range rep.Scenarios {
		switch {
		case s.Suite == SuiteWorkers:
			workers = append(workers, pt{float64(s.Workers), s.TurnsPerS})
			workersIdeal = append(workersIdeal, pt{float64(s.Workers), s.IdealTurnsPerS})
			workersP99 = append(workersP99, pt{float64(s.Workers), s.LatencyMs.P99})
		case s.Suite == SuiteZero && s.Shape == ShapeAllInOne && s.ToolCallsPerTurn == 0:
			zeroTP = append(zeroTP, pt{float64(s.Sessions), s.TurnsPerS})
			zeroP99 = append(zeroP99, pt{float64(s.Sessions), s.LatencyMs.P99})
		case s.Suite == SuiteZero && s.Shape == ShapeAllInOneBinary && s.ToolCallsPerTurn == 0:
			binTP = append(binTP, pt{float64(s.Sessions), s.TurnsPerS})
			binP99 = append(binP99, pt{float64(s.Sessions), s.LatencyMs.P99})
		case s.Suite == SuiteSlots:
			slowLabel = fmt.Sprintf("%g ms model, %d slots", s.ModelLatencyMs, s.Workers*s.SlotsPerWorker)
			slowTP = append(slowTP, pt{float64(s.Sessions), s.TurnsPerS})
			slowP99 = append(slowP99, pt{float64(s.Sessions), s.LatencyMs.P99})
			slowIdeal = append(slowIdeal, pt{float64(s.Sessions), s.IdealTurnsPerS})
		}
	}
	workersLabel := "multi-process"
	if len(rep.Scenarios) > 0 {
		for _, s := range rep.Scenarios {
			if s.Suite == SuiteWorkers {
				workersLabel = fmt.Sprintf("%g ms model, %d slots/worker", s.ModelLatencyMs, s.SlotsPerWorker)
				break
			}
		}
	}
	const pw, ph = 460, 300
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", 2*pw, 2*ph+30, 2*pw, 2*ph+30)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="20" text-anchor="middle" font-size="15" font-weight="bold">nanofleet bench — %s</text>`+"\n", pw, html.EscapeString(rep.Started))
	panels := []panel{
		{title: "Throughput vs worker processes", xlabel: "agent-worker processes", ylabel: "turns/s",
			series: []series{{workersLabel, "#1f77b4", false, workers}, {"ideal", "#999999", true, workersIdeal}}},
		{title: "p99 latency vs worker processes", xlabel: "agent-worker processes", ylabel: "p99 ms",
			series: []series{{workersLabel, "#d62728", false, workersP99}}},
		{title: "Throughput vs concurrent sessions (all-in-one)", xlabel: "concurrent sessions (log)", ylabel: "turns/s", logX: true,
			series: []series{{"0 ms model, in-process", "#1f77b4", false, zeroTP}, {"0 ms model, binary", "#9467bd", false, binTP},
				{slowLabel, "#2ca02c", false, slowTP}, {"ideal (" + slowLabel + ")", "#999999", true, slowIdeal}}},
		{title: "p99 latency vs concurrent sessions (all-in-one)", xlabel: "concurrent sessions (log)", ylabel: "p99 ms", logX: true, logY: true,
			series: []series{{"0 ms model, in-process", "#d62728", false, zeroP99}, {"0 ms model, binary", "#8c564b", false, binP99},
				{slowLabel, "#ff7f0e", false, slowP99}}},
	}
	for i, p := range panels {
		p.x, p.y, p.w, p.h = float64(i%2*pw), float64(30+i/2*ph), pw, ph
		p.draw(&b)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

type pt struct{ x, y float64 }

type series struct {
	name   string
	color  string
	dashed bool
	pts    []pt
}

type panel struct {
	title, xlabel, ylabel string
	logX, logY            bool
	series                []series
	x, y, w, h            float64
}

func (p panel) draw(b *strings.Builder) {
	const left, right, top, bottom = 60.0, 20.0, 30.0, 45.0
	x0, y0 := p.x+left, p.y+p.h-bottom // origin
	pwid, phei := p.w-left-right, p.h-top-bottom
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="middle" font-weight="bold">%s</text>`+"\n", p.x+p.w/2, p.y+18, html.EscapeString(p.title))
	var xs, ys []float64
	for _, s := range p.series {
		for _, q := range s.pts {
			if q.y > 0 || !p.logY {
				xs, ys = append(xs, q.x), append(ys, q.y)
			}
		}
	}
	if len(xs) == 0 {
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="middle" fill="#888">not measured in this run</text>`+"\n", p.x+p.w/2, p.y+p.h/2)
		return
	}
	xt := slices.Compact(slices.Sorted(slices.Values(xs)))
	xmin, xmax := xt[0], xt[len(xt)-1]
	fx := func(v float64) float64 {
		if xmax == xmin {
			return x0 + pwid/2
		}
		if p.logX {
			return x0 + pwid*(math.Log10(v)-math.Log10(xmin))/(math.Log10(xmax)-math.Log10(xmin))
		}
		return x0 + pwid*(v-xmin)/(xmax-xmin)
	}
	ymax := slices.Max(ys)
	var yt []float64
	var fy func(float64) float64
	if p.logY {
		lo := math.Pow(10, math.Floor(math.Log10(slices.Min(ys))))
		hi := math.Pow(10, math.Ceil(math.Log10(ymax)))
		if hi <= lo {
			hi = lo * 10
		}
		for v := lo; v <= hi*1.001; v *= 10 {
			yt = append(yt, v)
		}
		fy = func(v float64) float64 {
			return y0 - phei*(math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))
		}
	} else {
		step := niceStep(ymax / 5)
		top := math.Ceil(ymax/step) * step
		if top == 0 {
			top = 1
		}
		for v := 0.0; v <= top*1.0001; v += step {
			yt = append(yt, v)
		}
		fy = func(v float64) float64 { return y0 - phei*v/top }
	}
	// Axes, grid and ticks.
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x0, y0, x0+pwid, y0)
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x0, y0, x0, y0-phei)
	for _, v := range yt {
		y := fy(v)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e5e5e5"/>`+"\n", x0, y, x0+pwid, y)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" font-size="10">%s</text>`+"\n", x0-4, y+3, tick(v))
	}
	for _, v := range xt {
		x := fx(v)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x, y0, x, y0+4)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10">%s</text>`+"\n", x, y0+15, tick(v))
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x0+pwid/2, y0+32, html.EscapeString(p.xlabel))
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" transform="rotate(-90 %.1f %.1f)">%s</text>`+"\n",
		p.x+14, y0-phei/2, p.x+14, y0-phei/2, html.EscapeString(p.ylabel))
	// Series and legend.
	for i, s := range p.series {
		var pts []string
		for _, q := range s.pts {
			if p.logY && q.y <= 0 {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", fx(q.x), fy(q.y)))
		}
		if len(pts) == 0 {
			continue
		}
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="5,4"`
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", s.color, dash, strings.Join(pts, " "))
		if !s.dashed {
			for _, q := range pts {
				xy := strings.Split(q, ",")
				fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", xy[0], xy[1], s.color)
			}
		}
		ly := p.y + top + 4 + float64(i)*15
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", x0+8, ly, x0+28, ly, s.color, dash)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="11">%s</text>`+"\n", x0+32, ly+4, html.EscapeString(s.name))
	}
}

// niceStep rounds a raw tick step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func tick(v float64) string {
	switch {
	case v >= 1000 && math.Mod(v, 1000) == 0:
		return fmt.Sprintf("%gk", v/1000)
	case v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%g", v)
	}
}
