package model

import (
	"bytes"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

func sweepCurves(t *testing.T, f Fabric, rtts []time.Duration) []Curve {
	t.Helper()
	var b wl
	b.call("cudaLaunchKernel", 0, 5, 1)
	b.kernel(7, 10, 100, 1)
	g := b.build(t)
	return []Curve{{Name: "tiny", Points: g.Sweep(f, rtts)}, {Name: "same again", Points: g.Sweep(f, rtts)}}
}

// TestPlotLogAxisAndSettings: the RTT axis is logarithmic, RTT 0 sits on a
// tick labelled 0 left of the smallest RTT, and the title names the fabric
// settings the sweep holds fixed.
func TestPlotLogAxisAndSettings(t *testing.T) {
	t.Parallel()
	f := Fabric{Bandwidth: 12.5e9, Tags: 768, MRRS: 1024}
	sp, err := newSweepPlot(sweepCurves(t, f, DefaultSweep), 10)
	if err != nil {
		t.Fatal(err)
	}
	p := sp.plot
	if _, ok := p.X.Scale.(plot.LogScale); !ok {
		t.Errorf("RTT axis scale is %T, want plot.LogScale", p.X.Scale)
	}
	for _, s := range []string{"100 Gbit/s", "768 tags", "MRRS 1024 B"} {
		if !strings.Contains(p.Title.Text, s) {
			t.Errorf("title %q lacks %q", p.Title.Text, s)
		}
	}
	if p.X.Min != 0.5 || p.X.Max != 100 {
		t.Errorf("RTT axis spans %g..%g us, want 0.5 (where 0 is drawn) to 100", p.X.Min, p.X.Max)
	}
	labels := map[string]float64{}
	for _, tk := range p.X.Tick.Marker.Ticks(p.X.Min, p.X.Max) {
		if tk.Label != "" {
			labels[tk.Label] = tk.Value
		}
	}
	want := map[string]float64{"0": 0.5, "1": 1, "2": 2, "5": 5, "10": 10, "20": 20, "50": 50, "100": 100}
	for l, v := range want {
		if got, ok := labels[l]; !ok || got != v {
			t.Errorf("tick %q at %g (present %t), want at %g; ticks %v", l, got, ok, v, labels)
		}
	}
	if len(labels) != len(want) {
		t.Errorf("labelled ticks %v, want exactly %v", labels, want)
	}

	// Without RTT 0 there is no 0 tick and the axis starts at the
	// smallest RTT.
	sp, err = newSweepPlot(sweepCurves(t, Native, []time.Duration{2 * time.Microsecond, 30 * time.Microsecond}), 0)
	if err != nil {
		t.Fatal(err)
	}
	if sp.plot.X.Min != 2 || sp.plot.X.Max != 30 || !strings.Contains(sp.plot.Title.Text, "native rate") {
		t.Errorf("axis %g..%g, title %q; want 2..30 and a native link rate", sp.plot.X.Min, sp.plot.X.Max, sp.plot.Title.Text)
	}
	for _, tk := range sp.plot.X.Tick.Marker.Ticks(sp.plot.X.Min, sp.plot.X.Max) {
		if tk.Label == "0" {
			t.Errorf("a 0 tick on a sweep without RTT 0")
		}
	}
}

// TestPlotLegendBesideData: the legend stands right of the data area (so
// it covers neither curves nor the target line), inside the image, and the
// tick labels of the RTT axis stay inside the plot's area.
func TestPlotLegendBesideData(t *testing.T) {
	t.Parallel()
	sp, err := newSweepPlot(sweepCurves(t, Native, DefaultSweep), 10)
	if err != nil {
		t.Fatal(err)
	}
	c := draw.New(vgimg.New(plotWidth, plotHeight))
	plotArea, legendArea := sp.layout(c)
	data := sp.plot.DataCanvas(plotArea)
	if legendArea.Min.X < data.Max.X {
		t.Errorf("legend starts at x=%v, inside the data area that ends at x=%v", legendArea.Min.X, data.Max.X)
	}
	r := sp.legend.Rectangle(legendArea)
	if r.Min.X < legendArea.Min.X-1e-9 || r.Max.X > c.Max.X || r.Min.Y < c.Min.Y {
		t.Errorf("legend %v does not fit its column %v in the image %v", r, legendArea.Rectangle, c.Rectangle)
	}
	if sp.plot.Legend.Rectangle(c).Size().X != 0 {
		t.Errorf("the plot still draws a legend over its data")
	}
	ticks := sp.plot.X.Tick.Marker.Ticks(sp.plot.X.Min, sp.plot.X.Max)
	last := ticks[len(ticks)-1]
	half := sp.plot.X.Tick.Label.Rectangle(last.Label).Size().X / 2
	if x := data.X(sp.plot.X.Norm(last.Value)); x+half > plotArea.Max.X {
		t.Errorf("tick label %q ends at x=%v, past the plot's area (%v)", last.Label, x+half, plotArea.Max.X)
	}
	first := ticks[0]
	half = sp.plot.X.Tick.Label.Rectangle(first.Label).Size().X / 2
	if x := data.X(sp.plot.X.Norm(first.Value)); x-half < plotArea.Min.X {
		t.Errorf("tick label %q starts at x=%v, before the plot's area (%v)", first.Label, x-half, plotArea.Min.X)
	}
}

func TestPlotRejectsNothing(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := WritePlot(&b, "svg", nil, 10); err == nil {
		t.Error("no curves accepted")
	}
	if err := WritePlot(&b, "svg", []Curve{{Name: "empty"}}, 10); err == nil {
		t.Error("a curve without points accepted")
	}
}

// TestPlotSVGFitsLegend: the SVG is as wide as its background, and every
// legend entry, long names included, ends inside that width even in a
// font wider than the one measured: its x plus legendEm per character
// times the font size (a name once ran past a 566 pt image whose
// background stopped at 408 pt).
func TestPlotSVGFitsLegend(t *testing.T) {
	t.Parallel()
	curves := sweepCurves(t, Native, DefaultSweep)
	curves[0].Name = "a-rather-long-training-trace-name-resnet50-bs256"
	var b bytes.Buffer
	if err := WritePlot(&b, "svg", curves, 10); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	m := regexp.MustCompile(`<svg width="([0-9.]+)pt"`).FindStringSubmatch(svg)
	if m == nil {
		t.Fatalf("no width in %.300s", svg)
	}
	width, _ := strconv.ParseFloat(m[1], 64)
	// The first path is the background, a rectangle from 0,0.
	bg := regexp.MustCompile(`<path d="M0,0L([0-9.]+),0L[0-9.]+,([0-9.]+)L0,[0-9.]+Z" style="fill:#FFFFFF"`).FindStringSubmatch(svg)
	if bg == nil {
		t.Fatalf("no background rectangle in %.600s", svg)
	}
	if bgw, _ := strconv.ParseFloat(bg[1], 64); math.Abs(bgw-width) > 0.01 {
		t.Errorf("SVG %v pt wide, its background %v pt", width, bgw)
	}
	texts := regexp.MustCompile(`<text x="([-0-9.]+)"[^>]*\n?[^>]*font-size:([0-9.]+)px">([^<]*)</text>`).FindAllStringSubmatch(svg, -1)
	legend := map[string]bool{curves[0].Name: true, curves[1].Name: true, "target 10%": true}
	seen := 0
	for _, tx := range texts {
		if !legend[tx[3]] {
			continue
		}
		seen++
		x, _ := strconv.ParseFloat(tx[1], 64)
		size, _ := strconv.ParseFloat(tx[2], 64)
		if end := x + float64(len(tx[3]))*legendEm*size; end > width {
			t.Errorf("legend entry %q runs to %.1f pt, past the %.1f pt image", tx[3], end, width)
		}
	}
	if seen != len(legend) {
		t.Errorf("found %d of the %d legend entries among %d texts", seen, len(legend), len(texts))
	}
}
