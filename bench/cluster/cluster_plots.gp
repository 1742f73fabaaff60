# Pictures of the cluster simulator (bench/cluster/pollux_sim.sh): DIR holds
# gantt_POLICY.dat, util_POLICY.dat and jct_POLICY.dat (plot_data.py); OUT is
# the prefix of the pictures (OUT_gantt, OUT_util, OUT_jct_cdf, .png and .svg);
# NODES the pool's size; TITLE names the workload.
if (!exists("DIR")) DIR = "."
if (!exists("OUT")) OUT = "bench/results/cluster"
if (!exists("NODES")) NODES = 16
if (!exists("TITLE")) TITLE = "Pollux workload-1, 16 nodes x 4 GPUs"
policies = "static dorm goodput"
colors = "#c44e52 #4c72b0 #55a868"

# A cluster Gantt chart per policy: each node's owner over time, one colour per job.
do for [term = 1:2] {
  if (term == 1) { set terminal pngcairo size 1200,900 font ",10"; set output OUT . "_gantt.png" }
  if (term == 2) { set terminal svg size 1200,900 font ",10" dynamic; set output OUT . "_gantt.svg" }
  set multiplot layout 3,1 title "Partitions over time: " . TITLE noenhanced
  set style fill solid 0.9 noborder
  set palette defined (0 "#4c72b0", 1 "#dd8452", 2 "#55a868", 3 "#c44e52", 4 "#8172b3", 5 "#937860", 6 "#da8bc3", 7 "#8c8c8c", 8 "#ccb974", 9 "#64b5cd")
  set cbrange [0:10]
  unset colorbox
  set yrange [-0.6:NODES - 0.4]
  set ylabel "node"
  set xlabel "time (h)"
  do for [p in policies] {
    set title p
    plot DIR . "/gantt_" . p . ".dat" using (($2 + $3) / 2):1:(($3 - $2) / 2):(0.42):(int($4) % 10) \
         with boxxyerror lc palette notitle
  }
  unset multiplot
}
unset output

# Allocated share of the pool over time.
do for [term = 1:2] {
  if (term == 1) { set terminal pngcairo size 1100,450 font ",11"; set output OUT . "_util.png" }
  if (term == 2) { set terminal svg size 1100,450 font ",11" dynamic; set output OUT . "_util.svg" }
  set title "Utilisation over time: " . TITLE noenhanced
  set xlabel "time (h)"
  set ylabel "nodes allocated (share of the pool)"
  set yrange [0:1.05]
  set autoscale x
  set key bottom right
  plot for [i = 1:3] DIR . "/util_" . word(policies, i) . ".dat" using 1:2 with steps \
       lw 1.5 lc rgb word(colors, i) title word(policies, i)
}
unset output

# JCT distribution per policy (every job of the eight workloads).
do for [term = 1:2] {
  if (term == 1) { set terminal pngcairo size 900,520 font ",11"; set output OUT . "_jct_cdf.png" }
  if (term == 2) { set terminal svg size 900,520 font ",11" dynamic; set output OUT . "_jct_cdf.svg" }
  set title "Job completion times, Pollux's eight workloads (1,280 jobs)" noenhanced
  set xlabel "job completion time (s)"
  set ylabel "fraction of jobs"
  set logscale x
  set yrange [0:1]
  set key bottom right
  plot for [i = 1:3] DIR . "/jct_" . word(policies, i) . ".dat" using 1:2 with steps \
       lw 2 lc rgb word(colors, i) title word(policies, i)
}
unset output
