# Gantt picture of one simulated iteration (bench/sim_plots.sh). Input: DATA
# with columns row (0 = network, 1 = worker 0, 2 = straggler), start (ms),
# end (ms), kind (0 forward, 1 backward, 2 wait, 3 and 4 messages, alternating
# so that adjacent ones show apart); OUT; TITLE;
# ROWS, the row labels as a gnuplot ytics list.
if (!exists("DATA")) DATA = "bench/results/sim_gantt.dat"
if (!exists("OUT")) OUT = "bench/results/sim_gantt"
if (!exists("TITLE")) TITLE = "One simulated iteration"
set title TITLE noenhanced
set xlabel "time from the start of the iteration (ms)"
set yrange [-0.6:2.6]
eval("set ytics (" . ROWS . ")")
set grid x
set key outside bottom center horizontal
set style fill solid 0.85 noborder
h = 0.35
do for [term = 1:2] {
  if (term == 1) { set terminal pngcairo size 1100,420 font ",11"; set output OUT . ".png" }
  if (term == 2) { set terminal svg size 1100,420 font ",11" dynamic; set output OUT . ".svg" }
  plot DATA using ($4 == 0 ? ($2+$3)/2 : 1/0):1:(($3-$2)/2):(h) with boxxyerror lc rgb "#4c72b0" title "forward" \
       , '' using ($4 == 1 ? ($2+$3)/2 : 1/0):1:(($3-$2)/2):(h) with boxxyerror lc rgb "#55a868" title "backward" \
       , '' using ($4 == 2 ? ($2+$3)/2 : 1/0):1:(($3-$2)/2):(h) with boxxyerror lc rgb "#cccccc" title "wait (all-gather)" \
       , '' using ($4 == 3 ? ($2+$3)/2 : 1/0):1:(($3-$2)/2):(h) with boxxyerror lc rgb "#c44e52" title "message" \
       , '' using ($4 == 4 ? ($2+$3)/2 : 1/0):1:(($3-$2)/2):(h) with boxxyerror lc rgb "#8c2d2f" notitle
}
unset output
