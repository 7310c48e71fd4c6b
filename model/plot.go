package model

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Curve is one trace's overhead against added RTT.
type Curve struct {
	Name   string
	Points []Prediction
}

// PlotFormat returns the image format for a file name: "svg" or "png".
func PlotFormat(path string) (string, error) {
	switch ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), ".")); ext {
	case "svg", "png":
		return ext, nil
	default:
		return "", fmt.Errorf("model: plot %q: want a .svg or .png file", path)
	}
}

// Size of the plot without its legend, and the gap on either side of the
// legend's column; the image is as wide as the plot and that column.
const (
	plotWidth  = 20 * vg.Centimeter
	plotHeight = 11 * vg.Centimeter
	legendGap  = 4 * vg.Millimeter
)

// legendEm is the advance in ems the layout allows each character of a
// legend entry, at least: above a serif face's average (about 0.5), so a
// viewer that draws the SVG with a wider font than the Liberation Serif
// the widths were measured with still fits the names in the image.
const legendEm = 0.6

// WritePlot draws overhead (%) against added RTT (us, logarithmic), one
// line per curve, with the target as a dashed line when targetPct > 0, and
// writes it to w as format ("svg" or "png"). The title carries the fabric
// settings of the first curve; the legend stands beside the data.
func WritePlot(w io.Writer, format string, curves []Curve, targetPct float64) error {
	if format != "svg" && format != "png" {
		return fmt.Errorf("model: plot format %q: want svg or png", format)
	}
	sp, err := newSweepPlot(curves, targetPct)
	if err != nil {
		return err
	}
	width := sp.width()
	var c vg.CanvasWriterTo = vgsvg.New(width, plotHeight)
	if format == "png" {
		c = vgimg.PngCanvas{Canvas: vgimg.New(width, plotHeight)}
	}
	sp.draw(draw.New(c))
	_, err = c.WriteTo(w)
	return err
}

// sweepPlot is the plot and its legend, kept apart so that the legend can
// stand beside the data area instead of over it.
type sweepPlot struct {
	plot   *plot.Plot
	legend plot.Legend
	names  []string // the legend's entries
}

// newSweepPlot builds the plot of curves. RTT 0 (the native slot) has no
// place on a logarithmic axis: it is drawn at half the smallest positive
// RTT, on a tick labelled 0.
func newSweepPlot(curves []Curve, targetPct float64) (*sweepPlot, error) {
	if len(curves) == 0 || len(curves[0].Points) == 0 {
		return nil, fmt.Errorf("model: nothing to plot")
	}
	minRTT, maxRTT, zero := math.Inf(1), 0.0, false
	for _, c := range curves {
		for _, pr := range c.Points {
			x := rttMicros(pr.Fabric.RTT)
			if x <= 0 {
				zero = true
				continue
			}
			minRTT, maxRTT = min(minRTT, x), max(maxRTT, x)
		}
	}
	if math.IsInf(minRTT, 1) { // only RTT 0
		minRTT, maxRTT = 1, 10
	}
	floor := minRTT
	if zero {
		floor = minRTT / 2
	}
	if maxRTT <= floor {
		maxRTT = floor * 10
	}

	p := plot.New()
	p.Title.Text = "Predicted overhead behind the fabric\n" + fabricSettings(curves[0].Points[0].Fabric)
	p.Title.Padding = 3 * vg.Millimeter
	p.X.Label.Text = "added RTT (us, log scale)"
	p.Y.Label.Text = "overhead (%)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = rttTicks{zero: zero, floor: floor, min: minRTT}
	p.X.Min, p.X.Max = floor, maxRTT
	p.Add(plotter.NewGrid())

	var lines []any
	var names []string
	maxPct := 0.0
	for _, c := range curves {
		pts := make(plotter.XYs, len(c.Points))
		for i, pr := range c.Points {
			pts[i].X = max(rttMicros(pr.Fabric.RTT), floor)
			pts[i].Y = pr.OverheadPct
			maxPct = max(maxPct, pr.OverheadPct)
		}
		lines = append(lines, c.Name, pts)
		names = append(names, c.Name)
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return nil, fmt.Errorf("model: plot: %w", err)
	}
	// plotutil puts its entries in the plot's legend, drawn over the data;
	// move them to a legend of our own.
	sp := &sweepPlot{plot: p, legend: p.Legend, names: names}
	p.Legend = plot.NewLegend()
	sp.legend.Top, sp.legend.Left = true, true
	if targetPct > 0 {
		l, err := plotter.NewLine(plotter.XYs{{X: floor, Y: targetPct}, {X: maxRTT, Y: targetPct}})
		if err != nil {
			return nil, fmt.Errorf("model: plot: %w", err)
		}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
		p.Add(l)
		sp.legend.Add(fmt.Sprintf("target %g%%", targetPct), l)
		sp.names = append(sp.names, fmt.Sprintf("target %g%%", targetPct))
		maxPct = max(maxPct, targetPct)
	}
	p.Y.Min = 0
	p.Y.Max = max(maxPct*1.08, 1) // headroom above the highest point and the target
	return sp, nil
}

// legendWidth is the width of the legend's column: a thumbnail and the
// longest entry, measured or allowed legendEm per character, whichever
// is wider.
func (sp *sweepPlot) legendWidth() vg.Length {
	sty := sp.legend.TextStyle
	var w vg.Length
	for _, n := range sp.names {
		text := " " + n
		tw := max(sty.Rectangle(text).Max.X, vg.Length(float64(utf8.RuneCountInString(text))*legendEm)*sty.Font.Size)
		w = max(w, sp.legend.ThumbnailWidth+tw)
	}
	return w
}

// width is the image's width: the plot's and the legend's column.
func (sp *sweepPlot) width() vg.Length { return plotWidth + sp.legendWidth() + 2*legendGap }

// layout splits the canvas into the plot's area and the legend's column
// to its right, the legend's top level with the top of the data.
func (sp *sweepPlot) layout(c draw.Canvas) (plotArea, legendArea draw.Canvas) {
	lw := sp.legendWidth()
	plotArea = draw.Crop(c, 0, -(lw + 2*legendGap), 0, 0)
	top := sp.plot.DataCanvas(plotArea).Max.Y
	legendArea = c
	legendArea.Min.X = c.Max.X - lw - legendGap
	legendArea.Max.X = c.Max.X - legendGap
	legendArea.Max.Y = top
	return plotArea, legendArea
}

// draw paints the background under the whole image, the legend's column
// included (the plot's own covers only its area), then plot and legend.
func (sp *sweepPlot) draw(c draw.Canvas) {
	plotArea, legendArea := sp.layout(c)
	if bg := sp.plot.BackgroundColor; bg != nil {
		c.SetColor(bg)
		c.Fill(c.Rectangle.Path())
	}
	sp.plot.Draw(plotArea)
	sp.legend.Draw(legendArea)
}

func rttMicros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// fabricSettings names what the sweep holds fixed: link rate, tags, MRRS.
func fabricSettings(f Fabric) string {
	link := "link: native rate"
	if f.Bandwidth > 0 {
		link = fmt.Sprintf("link %s Gbit/s", strconv.FormatFloat(f.Bandwidth*8/1e9, 'g', 4, 64))
	}
	return fmt.Sprintf("%s, %d tags, MRRS %d B", link, f.Tags, f.MRRS)
}

// rttTicks marks a logarithmic RTT axis: labelled ticks at 1, 2 and 5
// times powers of ten, unlabelled ones between, and a tick labelled 0 at
// floor, where RTT 0 is drawn.
type rttTicks struct {
	zero       bool
	floor, min float64 // floor: where 0 is drawn; min: the smallest positive RTT
}

func (t rttTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	if t.zero {
		ticks = append(ticks, plot.Tick{Value: t.floor, Label: "0"})
	}
	// Ticks below the smallest RTT would crowd the 0 tick.
	start := lo
	if t.zero {
		start = t.min
	}
	for e := math.Floor(math.Log10(start)); math.Pow10(int(e)) <= hi; e++ {
		for m := 1; m <= 9; m++ {
			v := float64(m) * math.Pow10(int(e))
			if v < start*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			tk := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				tk.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			ticks = append(ticks, tk)
		}
	}
	return ticks
}
