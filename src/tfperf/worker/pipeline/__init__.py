"""worker/pipeline"""
