package model

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
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

// WritePlot draws overhead (%) against added RTT (µs), one line per curve,
// with the target as a dashed line when targetPct > 0, and writes it to w
// as format ("svg" or "png").
func WritePlot(w io.Writer, format string, curves []Curve, targetPct float64) error {
	if format != "svg" && format != "png" {
		return fmt.Errorf("model: plot format %q: want svg or png", format)
	}
	if len(curves) == 0 {
		return fmt.Errorf("model: nothing to plot")
	}
	p := plot.New()
	p.Title.Text = "Predicted overhead behind the fabric"
	p.X.Label.Text = "added RTT (µs)"
	p.Y.Label.Text = "overhead (%)"
	p.Add(plotter.NewGrid())
	var lines []any
	maxRTT := 0.0
	for _, c := range curves {
		pts := make(plotter.XYs, len(c.Points))
		for i, pr := range c.Points {
			pts[i].X = float64(pr.Fabric.RTT) / float64(time.Microsecond)
			pts[i].Y = pr.OverheadPct
			maxRTT = max(maxRTT, pts[i].X)
		}
		lines = append(lines, c.Name, pts)
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return fmt.Errorf("model: plot: %w", err)
	}
	if targetPct > 0 {
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: targetPct}, {X: maxRTT, Y: targetPct}})
		if err != nil {
			return fmt.Errorf("model: plot: %w", err)
		}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("target %g%%", targetPct), l)
	}
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	wt, err := p.WriterTo(16*vg.Centimeter, 10*vg.Centimeter, format)
	if err != nil {
		return fmt.Errorf("model: plot: %w", err)
	}
	_, err = wt.WriteTo(w)
	return err
}
