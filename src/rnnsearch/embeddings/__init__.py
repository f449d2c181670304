"""Word vectors: gensim word2vec training, evaluation, sense splitting, loading into a model."""
