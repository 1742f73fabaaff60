# Scaling efficiency against workers, one line per policy (bench/sim_plots.sh).
# Input: DATA with columns workers, then one efficiency (%) per policy, a
# header line naming them; OUT without extension; TITLE.
if (!exists("DATA")) DATA = "bench/results/sim_efficiency.dat"
if (!exists("OUT")) OUT = "bench/results/sim_efficiency"
if (!exists("TITLE")) TITLE = "Simulated scaling efficiency"
set title TITLE noenhanced
set xlabel "workers"
set ylabel "scaling efficiency T_1 / T_iter (%)" noenhanced
set logscale x 2
set xrange [3:3000]
set yrange [0:105]
set key bottom left box opaque
set grid
ncol = system("head -1 " . DATA . " | wc -w") + 0
do for [term = 1:2] {
  if (term == 1) { set terminal pngcairo size 900,560 font ",11"; set output OUT . ".png" }
  if (term == 2) { set terminal svg size 900,560 font ",11" dynamic; set output OUT . ".svg" }
  plot for [c = 2:ncol] DATA using 1:c with linespoints lw 2 pt (c - 1) title columnheader(c)
}
unset output
