# Makes a reference reader study and the tables iMRMC computes for it.
# Rscript make_reference.R DESIGN SEED OUT_PREFIX
#   DESIGN: split-plot (readers and cases in two blocks, each reader reading only its block's
#           cases, in both modalities) or sparse (30 % of the reads removed at random).
# Writes OUT_PREFIX.imrmc, OUT_PREFIX_Ustat.csv and OUT_PREFIX_perReader.csv.
library(iMRMC)
args <- commandArgs(trailingOnly = TRUE)
design <- args[1]; seed <- as.integer(args[2]); out <- args[3]
init.lecuyerRNG(stream = seed)
cfg <- sim.gRoeMetz.config()
cfg$nR <- 6; cfg$nC.neg <- 36; cfg$nC.pos <- 30
cfg$modalityID.A <- "unaided"; cfg$modalityID.B <- "evidence"; cfg$mu.Bpos <- cfg$mu.Bpos + 0.3
d <- sim.gRoeMetz(cfg)
d$modalityID <- as.character(d$modalityID)
d$readerID <- as.character(d$readerID)
d$caseID <- as.character(d$caseID)
reads <- d$readerID != "truth"
set.seed(seed)
if (design == "split-plot") {
  readers <- sort(unique(d$readerID[reads]))
  cases <- sort(unique(d$caseID[reads]))
  reader.block <- setNames(rep(1:2, length.out = length(readers)), readers)
  case.block <- setNames(rep(1:2, length.out = length(cases)), cases)
  keep <- !reads | reader.block[d$readerID] == case.block[d$caseID]
} else if (design == "sparse") {
  keep <- rep(TRUE, nrow(d))
  idx <- which(reads)
  keep[sample(idx, round(0.3 * length(idx)))] <- FALSE
} else stop("unknown design")
d <- d[keep, ]
con <- file(paste0(out, ".imrmc"), "w")
writeLines(c(paste("Reference reader study, design", design, "(simulated by iMRMC sim.gRoeMetz, 6 readers, 36 negative and 30 positive cases)"),
             paste("seed", seed), "BEGIN DATA:"), con)
write.table(d[, c("readerID", "caseID", "modalityID", "score")], con, sep = ",",
            row.names = FALSE, col.names = FALSE, quote = FALSE)
close(con)
r <- doIMRMC(read.csv(paste0(out, ".imrmc"), skip = 3, header = FALSE,
                      col.names = c("readerID", "caseID", "modalityID", "score")))
write.csv(r$Ustat, paste0(out, "_Ustat.csv"), row.names = FALSE)
write.csv(r$perReader, paste0(out, "_perReader.csv"), row.names = FALSE)
