#!/bin/sh
# Regenerates the shipped profiles in profiles/ (about 5 minutes on one core).
# Uses Debian's PyTorch (apt-get install python3-torch python3-torchvision).
set -e
cd "$(dirname "$0")/.."
for m in resnet50 resnet152 vgg16 googlenet densenet201 bert_base; do
  nice /usr/bin/python3 tools/profile_model.py "$m" --batch 4 --threads 1 \
    --warmup 2 --iters 5 -o "profiles/$m.json"
done
