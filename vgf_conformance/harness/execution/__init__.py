"""One case's export and runs with its watchdog (runner), the batches that share a worker's Vulkan runs, a hung case's end, and xdist's scheduler that goes on after a lost worker."""
